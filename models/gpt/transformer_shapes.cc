#include "models/gpt/transformer_shapes.h"

#include <algorithm>

#include "core/error.h"
#include "models/gpt/gpt_specs.h"

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
  ZS_CHECK(head_dim >= 0 && head_dim <= 16384, ErrorCode::kInvalidArgument,
           "transformer: head_dim {} is outside 0..16384 (0 = width / heads)", head_dim);
  ZS_CHECK(head_dim > 0 || width % heads == 0, ErrorCode::kInvalidArgument,
           "transformer: width {} must divide by heads {} (or set head_dim)", width, heads);
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
  const long double D = head_dim > 0 ? static_cast<long double>(heads) * head_dim : C;
  const long double params =
      (vocab + context) * C + layers * (2 * C * C + 2 * C * D + 2 * C * F) + vocab * C;
  ZS_CHECK(params < 1e15L, ErrorCode::kInvalidArgument,
           "transformer: about {:.3g} parameters, more than the 1e15 a plan can hold",
           static_cast<double>(params));
  ZS_CHECK(kv_heads >= 0 && kv_heads <= heads && heads % (kv_heads > 0 ? kv_heads : heads) == 0,
           ErrorCode::kInvalidArgument, "transformer: kv_heads {} must divide heads {}", kv_heads,
           heads);
  if (adapters.lora.rank != 0 || adapters.int8.accept) adapters.validate();
}

GptArchitecture TransformerShape::arch() const {
  GptArchitecture a = components;
  if (family == TransformerFamily::kLlama) {
    a.norm = NormKind::kRMSNorm;
    a.positions = PositionKind::kRotary;
    a.mlp = MlpKind::kSwiGLU;
    a.qkv_bias = a.proj_bias = a.mlp_bias = false;
  }
  a.layers = layers;
  a.heads = heads;
  a.width = width;
  a.context = context;
  a.vocab = vocab;
  a.ffn = ffn_width();
  a.kv_heads = kv_heads;
  a.head_dim_override = head_dim;
  a.qk_norm = qk_norm;
  a.rope_theta = rope_theta;
  a.norm_eps = norm_eps;
  return a;
}

std::vector<std::vector<TransformerParam>> TransformerShape::unit_params() const {
  validate();
  GptConfig c;
  c.arch = arch();
  c.adapters = adapters;
  // The model's own declarations (models/gpt/gpt_specs.h): every block declares the same list.
  auto params = [](const std::vector<ParamSpec>& specs) {
    std::vector<TransformerParam> out;
    for (const ParamSpec& p : specs) {
      if (p.tied()) continue;  // the embed unit's wte
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      out.push_back({n, p.shape.size() == 2 ? p.shape[0] : 0, p.trainable, p.accepts_int8});
    }
    return out;
  };
  std::vector<std::vector<TransformerParam>> units;
  units.push_back(params(gpt_embed_specs(c)));
  const std::vector<TransformerParam> block = params(gpt_block_specs(c));
  for (int l = 0; l < layers; ++l) units.push_back(block);
  units.push_back(params(gpt_head_specs(c)));
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
  const std::string family = arch.family();
  s.family =
      family == "llama" || family == "qwen3" ? TransformerFamily::kLlama : TransformerFamily::kGpt;
  s.components = arch;
  s.kv_heads = arch.kv_heads;
  s.head_dim = arch.head_dim_override;
  s.qk_norm = arch.qk_norm;
  s.rope_theta = arch.rope_theta;
  s.norm_eps = arch.norm_eps;
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
  if (name == "llama-3-8b") {
    TransformerShape s;
    s.family = TransformerFamily::kLlama;
    s.layers = 32;
    s.width = 4096;
    s.heads = 32;
    s.kv_heads = 8;
    s.ffn = 14336;
    s.vocab = 128256;
    s.context = 8192;
    s.rope_theta = 500000.0f;
    return s;
  }
  if (name == "llama-3.2-1b") {
    TransformerShape s;
    s.family = TransformerFamily::kLlama;
    s.layers = 16;
    s.width = 2048;
    s.heads = 32;
    s.kv_heads = 8;
    s.ffn = 8192;
    s.vocab = 128256;
    s.context = 8192;
    s.rope_theta = 500000.0f;
    s.components.tied_embeddings = true;
    return s;
  }
  if (name == "qwen3-0.6b") {
    TransformerShape s;
    s.family = TransformerFamily::kLlama;
    s.layers = 28;
    s.width = 1024;
    s.heads = 16;
    s.kv_heads = 8;
    s.head_dim = 128;
    s.qk_norm = true;
    s.ffn = 3072;
    s.vocab = 151936;
    s.context = 4096;
    s.rope_theta = 1e6f;
    s.norm_eps = 1e-6f;
    s.components.tied_embeddings = true;
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> transformer_shape_names() {
  return {"gpt2",     "gpt2-medium", "gpt2-large",   "gpt2-xl",   "gpt-6b",
          "llama-7b", "llama-3-8b",  "llama-3.2-1b", "qwen3-0.6b"};
}

ActivationPlan transformer_activation_plan(const TransformerShape& shape, int64_t micro_batch,
                                           DType compute_dtype, bool checkpoint, DeviceKind device,
                                           CpuGemm cpu_gemm, int threads, int64_t head_chunk,
                                           GptAttention attention) {
  shape.validate();
  ZS_CHECK(micro_batch >= 1, ErrorCode::kInvalidArgument, "micro-batch of {} sequences < 1",
           micro_batch);
  ZS_CHECK(head_chunk >= kGptHeadChunkAuto, ErrorCode::kInvalidArgument,
           "head chunk {} is not auto (-1), off (0) or a row count", head_chunk);
  {  // Every activation size must fit in int64 with room to add: bound an over-estimate.
    const long double B = micro_batch, T = shape.context, H = shape.heads,
                      C = std::max<long double>(shape.width, shape.arch().attn_width()),
                      F = shape.ffn_width(), V = shape.vocab, L = shape.layers;
    const long double bytes =
        (L + 2) * (6 * B * H * T * T + B * T * (16 * C + 8 * F)) + 16 * B * T * V;
    ZS_CHECK(bytes < 1e18L, ErrorCode::kInvalidArgument,
             "activations of {} sequence(s) x {} tokens (about {:.3g} bytes) are beyond what can "
             "be planned (1e18 bytes)",
             micro_batch, shape.context, static_cast<double>(bytes));
  }
  GptActivationDims d = GptActivationDims::of(GptConfig{shape.arch(), {}, shape.adapters});
  d.batch = micro_batch;
  d.compute_dtype = compute_dtype;
  d.checkpoint = checkpoint;
  d.threads = threads;
  d.head_chunk = head_chunk;
  d.attention = attention;
  return gpt_activation_plan(d, device, cpu_gemm);
}

}  // namespace zs::nn
