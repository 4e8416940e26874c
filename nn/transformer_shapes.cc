#include "nn/transformer_shapes.h"

#include "core/error.h"
#include "nn/gpt_specs.h"

namespace zs::nn {

void TransformerShape::validate() const {
  auto pos = [](int64_t v, const char* name) {
    ZS_CHECK(v > 0, ErrorCode::kInvalidArgument, "transformer: {} must be positive, got {}", name,
             v);
  };
  pos(layers, "layers");
  pos(width, "width");
  pos(heads, "heads");
  pos(vocab, "vocab");
  pos(context, "context");
  ZS_CHECK(ffn >= 0, ErrorCode::kInvalidArgument, "transformer: ffn {} < 0", ffn);
  ZS_CHECK(width % heads == 0, ErrorCode::kInvalidArgument,
           "transformer: width {} must divide by heads {}", width, heads);
  // Bounds that keep every size below int64 and the unit list small enough to build: a shape
  // past them is a typo, not a model (the largest trained models have ~100 layers, width ~20k).
  auto at_most = [](int64_t v, int64_t max, const char* name) {
    ZS_CHECK(v <= max, ErrorCode::kInvalidArgument, "transformer: {} {} is above the {} allowed",
             name, v, max);
  };
  at_most(layers, 100000, "layers");
  at_most(width, int64_t{1} << 20, "width");
  at_most(ffn, int64_t{1} << 22, "ffn");
  at_most(vocab, int64_t{1} << 24, "vocab");
  at_most(context, int64_t{1} << 24, "context");
  const long double C = width, F = ffn > 0 ? ffn : 4.0L * width;
  const long double params = (vocab + context) * C + layers * (4 * C * C + 2 * C * F) + vocab * C;
  ZS_CHECK(params < 1e15L, ErrorCode::kInvalidArgument,
           "transformer: about {:.3g} parameters, more than the 1e15 a plan can hold",
           static_cast<double>(params));
  if (adapters.lora.rank != 0 || adapters.int8.accept) {
    ZS_CHECK(family == TransformerFamily::kGpt, ErrorCode::kInvalidArgument,
             "transformer: LoRA adapters (rank {}) and int8 compute are planned for the gpt family "
             "only",
             adapters.lora.rank);
    adapters.validate();
  }
}

std::vector<std::vector<TransformerParam>> TransformerShape::unit_params() const {
  validate();
  const int64_t C = width, F = ffn_width(), V = vocab, T = context;
  // [Note: LoRA] with freeze_base every base parameter is frozen.
  const GptLoraConfig& lora = adapters.lora;
  const bool base_trains = !(lora.enabled() && lora.freeze_base);
  auto mat = [&](int64_t rows, int64_t cols) {
    return TransformerParam{rows * cols, rows, base_trains};
  };
  auto vec = [&](int64_t n) { return TransformerParam{n, 0, base_trains}; };
  std::vector<std::vector<TransformerParam>> units;
  if (family == TransformerFamily::kGpt) {
    // nn/gpt_specs.cc: embed {wte, wpe}; block {ln1.w, ln1.b, qkv.w, qkv.b, proj.w, proj.b,
    // ln2.w, ln2.b, fc.w, fc.b, fc_proj.w, fc_proj.b, then per target lora_A, lora_B};
    // head {ln_f.w, ln_f.b, lm_head.w}.
    units.push_back({mat(V, C), mat(T, C)});
    std::vector<TransformerParam> block = {vec(C),    vec(C), mat(3 * C, C), vec(3 * C),
                                           mat(C, C), vec(C), vec(C),        vec(C),
                                           mat(F, C), vec(F), mat(C, F),     vec(C)};
    // [Note: int8 base compute] as gpt_block_specs(): the four linears' weights.
    for (int i : {kQkvW, kProjW, kFcW, kFcProjW})
      block[static_cast<size_t>(i)].accepts_int8 = adapters.int8.accept;
    const int64_t r = lora.rank;
    for (int t = 0; t < kNumGptLoraTargets && lora.enabled(); ++t) {
      if (!lora.targets_linear(static_cast<GptLoraTarget>(t))) continue;
      int64_t in = 0, out = 0;
      gpt_lora_linear_shape(static_cast<GptLoraTarget>(t), C, F, &in, &out);
      block.push_back({r * in, r, true});     // lora_A [r, in]
      block.push_back({out * r, out, true});  // lora_B [out, r]
    }
    for (int l = 0; l < layers; ++l) units.push_back(block);
    units.push_back({vec(C), vec(C), mat(V, C)});
  } else {
    // embed {tok_embeddings}; block {attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3};
    // head {norm, output}.
    units.push_back({mat(V, C)});
    for (int l = 0; l < layers; ++l)
      units.push_back({vec(C), mat(C, C), mat(C, C), mat(C, C), mat(C, C), vec(C), mat(F, C),
                       mat(C, F), mat(F, C)});
    units.push_back({vec(C), mat(V, C)});
  }
  return units;
}

std::vector<std::vector<int64_t>> TransformerShape::unit_param_numels() const {
  std::vector<std::vector<int64_t>> units;
  for (const auto& u : unit_params()) {
    units.emplace_back();
    for (const TransformerParam& p : u) units.back().push_back(p.numel);
  }
  return units;
}

int64_t TransformerShape::num_params() const {
  int64_t n = 0;
  for (const auto& u : unit_param_numels())
    for (int64_t p : u) n += p;
  return n;
}

int64_t TransformerShape::num_trainable_params() const {
  int64_t n = 0;
  for (const auto& u : unit_params())
    for (const TransformerParam& p : u) n += p.trainable ? p.numel : 0;
  return n;
}

TransformerShape transformer_shape_of(const GptArchitecture& arch, const GptAdapters& adapters) {
  TransformerShape s;
  s.family = TransformerFamily::kGpt;
  s.layers = arch.layers;
  s.width = arch.width;
  s.heads = arch.heads;
  s.ffn = arch.ffn_width();
  s.vocab = arch.vocab;
  s.context = arch.context;
  s.adapters = adapters;
  return s;
}

std::optional<TransformerShape> transformer_shape_by_name(std::string_view name) {
  auto gpt = [](int L, int C, int H) {
    TransformerShape s;
    s.layers = L;
    s.width = C;
    s.heads = H;
    return s;
  };
  if (name == "gpt2") return gpt(12, 768, 12);
  if (name == "gpt2-medium") return gpt(24, 1024, 16);
  if (name == "gpt2-large") return gpt(36, 1280, 20);
  if (name == "gpt2-xl") return gpt(48, 1600, 25);
  if (name == "gpt-6b") {
    TransformerShape s = gpt(28, 4096, 16);
    s.vocab = 50400;
    s.context = 2048;
    return s;
  }
  if (name == "llama-7b" || name == "llama-6.7b") {
    TransformerShape s;
    s.family = TransformerFamily::kLlama;
    s.layers = 32;
    s.width = 4096;
    s.heads = 32;
    s.ffn = 11008;
    s.vocab = 32000;
    s.context = 2048;
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> transformer_shape_names() {
  return {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt-6b", "llama-7b"};
}

ActivationPlan transformer_activation_plan(const TransformerShape& shape, int64_t micro_batch,
                                           DType compute_dtype, bool checkpoint, DeviceKind device,
                                           CpuGemm cpu_gemm) {
  shape.validate();
  ZS_CHECK(micro_batch >= 1, ErrorCode::kInvalidArgument, "micro-batch of {} sequences < 1",
           micro_batch);
  {  // Every activation size must fit in int64 with room to add: bound an over-estimate.
    const long double B = micro_batch, T = shape.context, C = shape.width, H = shape.heads,
                      F = shape.ffn_width(), V = shape.vocab, L = shape.layers;
    const long double bytes =
        (L + 2) * (6 * B * H * T * T + B * T * (16 * C + 8 * F)) + 16 * B * T * V;
    ZS_CHECK(bytes < 1e18L, ErrorCode::kInvalidArgument,
             "activations of {} sequence(s) x {} tokens (about {:.3g} bytes) are beyond what can "
             "be planned (1e18 bytes)",
             micro_batch, shape.context, static_cast<double>(bytes));
  }
  if (shape.family == TransformerFamily::kGpt) {
    GptActivationDims d;
    d.batch = micro_batch;
    d.context = shape.context;
    d.width = shape.width;
    d.heads = shape.heads;
    d.ffn = shape.ffn_width();
    d.vocab = shape.vocab;
    d.layers = shape.layers;
    d.compute_dtype = compute_dtype;
    d.checkpoint = checkpoint;
    d.lora_rank = shape.adapters.lora.rank;
    d.lora_targets = shape.adapters.lora.target_mask();
    d.int8_accept = shape.adapters.int8.accept;
    d.int8_outlier_threshold = shape.adapters.int8.outlier_threshold;
    return gpt_activation_plan(d, device, cpu_gemm);
  }
  // LLaMA: an estimate in the manner of Korthikanti et al. 2022 (no dropout, no sequence
  // parallelism, attention probabilities materialised), activations in the compute dtype (e
  // bytes), per layer e (8 M C + B H T^2 + 4 M F): [M, C] tensors: norm-1 input, QKV input, Q, K,
  // V, attention output, norm-2 input, MLP input; the probabilities; [M, F]: SwiGLU gate, up,
  // SiLU(gate), their product. Checkpointed: the layer input M C e.
  constexpr int64_t kF4 = 4;
  const int64_t B = micro_batch, T = shape.context, C = shape.width, H = shape.heads,
                F = shape.ffn_width(), V = shape.vocab, L = shape.layers;
  const int64_t M = B * T, bhtt = B * H * T * T;
  const int64_t e = static_cast<int64_t>(dtype_size(compute_dtype));
  const int64_t block_set = e * (8 * M * C + bhtt + 4 * M * F);
  const int64_t x = M * C * e;
  ActivationPlan a;
  a.counted = true;
  a.exact = false;
  a.checkpointed = checkpoint;
  a.micro_batch = B;
  a.tokens = M;
  a.per_layer = block_set;
  a.per_layer_checkpointed = x;
  a.inputs = 2 * M * 4;
  a.blocks = checkpoint ? L * x : L * block_set;
  a.recompute = checkpoint ? block_set : 0;
  a.head = x + M * V * kF4;   // final norm input, fp32 logits
  a.workspace = M * V * kF4;  // logits gradient
  return a;
}

}  // namespace zs::nn
