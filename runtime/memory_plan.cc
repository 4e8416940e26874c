#include "runtime/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sharding/layout.h"

namespace zs {

namespace {

constexpr int64_t kF4 = 4;  // sizeof(float): GptModel's activations and temporaries are fp32

// One block's kept activations, GptBlockBuffers (nn/gpt_block_buffers.h), shared by both GPT
// models: h1, q, k, v, a, h2 [M, C] e; mean/rstd x2 [M] fp32; p [B, H, T, T] fp32 (+ pm e when
// lowp); x2 [M, C] fp32; f [M, F] fp32; g [M, F] e.
int64_t gpt_block_set(int64_t M, int64_t C, int64_t F, int64_t bhtt, int64_t e, bool lowp) {
  return 6 * M * C * e + 4 * M * kF4 + bhtt * kF4 + (lowp ? bhtt * e : 0) + M * C * kF4 +
         M * F * kF4 + M * F * e;
}

// [Note: CUDA GPT activations] Mirrors CudaGptModel::State's constructor (nn/cuda/gpt_cuda.cc)
// buffer by buffer; every buffer below goes through its act(), i.e. is registered under
// kActivations and counted in CudaGptModel::activation_bytes(), except the cuBLASLt workspace,
// which CublasContext (nn/cuda/gemm.cc) registers itself and the model adds to act_bytes.
// M = B T, e = the size of the compute dtype (the matmul dtype on the GPU: 2 for bf16 *and*
// fp16, else 4), lowp = 16-bit compute.
//   ids      (5 M + 1) int32: inputs, targets, and the embedding-gradient index (order, rows,
//            offsets [M + 1]): [Note: token upload] in nn/cuda/gpt_cuda_state.h
//   xs       (L + 1) [M, C] fp32 (xs[L] is the head's input)
//   blocks   GptBlockBuffers::allocate (nn/gpt_block_buffers.h), L sets or 1 when checkpointing:
//            h1, q, k, v, a, h2 [M, C] e; mean/rstd x2 [M] fp32; p [B, H, T, T] fp32 (+ pm e
//            when lowp); x2 [M, C] fp32; f [M, F] fp32; g [M, F] e
//   head     hf [M, C] e; meanf, rstdf [M] fp32; logits [M, V] fp32 (their gradient in place);
//            row_loss [M] fp32
//   temps    qkv [M, 3C] fp32; att_s [B, H, T, T] fp32; att_o [M, C] fp32; att_dom [M, C] e;
//            att_dsm [B, H, T, T] e (lowp); att_dq, dk, dv [M, C] fp32; dres [M, C] fp32;
//            dwide [M, max(F, 3C)] fp32; dwide_mm [M, max(F, 3C, V)] e (lowp); dnarrow [M, C]
//            fp32; dnarrow_mm [M, C] e (lowp); pscratch 4 slots of max(F, 3C) rounded up to 64
//            floats; bias_scratch max(chunks F', 2 chunks C) floats, F' = max(F, 3C), chunks =
//            clamp(ceil(M / 256), 1, 64) (bias_backward_scratch_floats and
//            layernorm_backward_scratch_floats in nn/cuda/kernels.h)
//   cuBLASLt workspace: 32 MiB (CublasContext's default, nn/cuda/gemm.h)
// Not device memory, not counted: two pinned staging slots of the ids' layout, row_loss_host
// [M] and logits_host [V] fp32 (pinned host, registered under kOther: pinned_host), the host
// counts vector [V + 1] (untracked). CudaLinear, CudaAttention and CudaGemm allocate nothing.
// Keep this in step with nn/cuda/gpt_cuda.cc: tests/nn/cuda_gpt_test.cc compares it with
// CudaGptModel::activation_bytes() and the tracker on a GPU; tests/runtime/plan_arith_test.cc
// with a hand-written list of the buffers.
constexpr int64_t kCudaIdsPerToken = 5;                // CudaGptModel::State::kIdsPerToken
constexpr int64_t kCublasWorkspaceBytes = 32ll << 20;  // CublasContext's workspace_bytes

int64_t cuda_column_sum_chunks(int64_t M) {  // nn::gpu::bias_backward_chunks
  return std::clamp<int64_t>((M + 255) / 256, 1, 64);
}

ActivationPlan cuda_gpt_activations(ActivationPlan a, int64_t B, int64_t T, int64_t C, int64_t H,
                                    int64_t F, int64_t V, int64_t L, DType dtype, bool checkpoint) {
  const int64_t M = B * T, bhtt = B * H * T * T;
  const bool lowp = dtype != DType::kF32;
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  const int64_t block_set = gpt_block_set(M, C, F, bhtt, e, lowp);
  const int64_t x = M * C * kF4;  // one block input xs[l]
  a.exact = true;
  a.per_layer = x + block_set;
  a.per_layer_checkpointed = x;
  const int64_t nids = kCudaIdsPerToken * M + 1;
  ZS_CHECK(nids <= std::numeric_limits<int32_t>::max(), ErrorCode::kInvalidArgument,
           "cuda gpt: batch x context = {} tokens is too many", M);  // as CudaGptModel's check
  a.inputs = nids * 4;
  a.blocks = L * x + (checkpoint ? 0 : L * block_set);
  a.recompute = checkpoint ? block_set : 0;
  a.head = x + M * C * e + 2 * M * kF4 + M * V * kF4 + M * kF4;
  const int64_t wide = std::max(F, 3 * C);
  const int64_t chunks = cuda_column_sum_chunks(M);
  a.workspace = M * 3 * C * kF4                                   // qkv
                + bhtt * kF4 + M * C * kF4                        // att_s, att_o
                + M * C * e + (lowp ? bhtt * e : 0)               // att_dom, att_dsm
                + 3 * M * C * kF4                                 // att_dq, dk, dv
                + M * C * kF4                                     // dres
                + M * wide * kF4                                  // dwide
                + (lowp ? M * std::max(wide, V) * e : 0)          // dwide_mm
                + M * C * kF4 + (lowp ? M * C * e : 0)            // dnarrow, dnarrow_mm
                + 4 * ((wide + 63) / 64 * 64) * kF4               // pscratch
                + std::max(chunks * wide, 2 * chunks * C) * kF4;  // bias_scratch
  a.gemm_workspace = kCublasWorkspaceBytes;
  a.pinned_host = 2 * nids * 4 + M * kF4 + V * kF4;  // staging[2], row_loss_host, logits_host
  return a;
}

}  // namespace

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
}

std::vector<std::vector<int64_t>> TransformerShape::unit_param_numels() const {
  validate();
  const int64_t C = width, F = ffn_width(), V = vocab, T = context;
  std::vector<std::vector<int64_t>> units;
  if (family == TransformerFamily::kGpt) {
    // nn/gpt_units.cc: embed {wte, wpe}; block {ln1.w, ln1.b, qkv.w, qkv.b, proj.w, proj.b,
    // ln2.w, ln2.b, fc.w, fc.b, fc_proj.w, fc_proj.b}; head {ln_f.w, ln_f.b, lm_head.w}.
    units.push_back({V * C, T * C});
    for (int l = 0; l < layers; ++l)
      units.push_back({C, C, 3 * C * C, 3 * C, C * C, C, C, C, F * C, F, C * F, C});
    units.push_back({C, C, V * C});
  } else {
    // embed {tok_embeddings}; block {attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3};
    // head {norm, output}.
    units.push_back({V * C});
    for (int l = 0; l < layers; ++l)
      units.push_back({C, C * C, C * C, C * C, C * C, C, F * C, C * F, F * C});
    units.push_back({C, V * C});
  }
  return units;
}

int64_t TransformerShape::num_params() const {
  int64_t n = 0;
  for (const auto& u : unit_param_numels())
    for (int64_t p : u) n += p;
  return n;
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
  return {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-7b"};
}

std::vector<std::vector<int64_t>> units_for_param_count(int64_t n) {
  ZS_CHECK(n >= 1, ErrorCode::kInvalidArgument, "parameter count {} < 1", n);
  // 12 L C^2 = n with C = 128 L  =>  L = cbrt(n / (12 * 128^2)).
  const double l = std::cbrt(static_cast<double>(n) / (12.0 * 128.0 * 128.0));
  const int64_t L = std::clamp<int64_t>(std::llround(l), 1, n);
  std::vector<std::vector<int64_t>> units;
  for (int64_t i = 0; i < L; ++i) units.push_back({n / L + (i < n % L ? 1 : 0)});
  return units;
}

ModelDesc ModelDesc::from_units(std::vector<std::vector<int64_t>> units) {
  ModelDesc d;
  d.units = std::move(units);
  return d;
}

ModelDesc ModelDesc::from_transformer(const TransformerShape& shape) {
  ModelDesc d;
  d.units = shape.unit_param_numels();
  d.transformer = shape;
  return d;
}

ModelDesc ModelDesc::from_param_count(int64_t n) { return from_units(units_for_param_count(n)); }

int64_t ModelDesc::num_params() const {
  int64_t n = 0;
  for (const auto& u : units)
    for (int64_t p : u) n += p;
  return n;
}

void PlanConfig::validate() const {
  engine.validate();
  ZS_CHECK(world >= 1, ErrorCode::kInvalidArgument, "ranks {} < 1", world);
  ZS_CHECK(ranks_per_node >= 1 && ranks_per_node <= world && world % ranks_per_node == 0,
           ErrorCode::kInvalidArgument, "ranks per node {} must divide the {} ranks",
           ranks_per_node, world);
  ZS_CHECK(rank >= 0 && rank < world, ErrorCode::kInvalidArgument, "rank {} outside [0, {})", rank,
           world);
  ZS_CHECK(reserve_bytes >= 0, ErrorCode::kInvalidArgument, "reserve {} bytes < 0", reserve_bytes);
  const int64_t per_step = static_cast<int64_t>(world) * engine.micro_batches;
  ZS_CHECK(global_batch >= 0 && global_batch % per_step == 0, ErrorCode::kInvalidArgument,
           "batch {} must be a positive multiple of ranks x micro-batches = {}", global_batch,
           per_step);
}

// [Note: GPT activations] The CPU model (device kCpu; the CUDA model's is
// [Note: CUDA GPT activations] above). Mirrors GptModel::State's constructor (nn/gpt.cc) buffer
// by buffer:
// M = B T tokens, e = bytes of the matmul dtype (2 for bf16 compute, else 4), lowp = bf16.
// Kept per block (BlockActs): h1, q, k, v, a, h2 [M, C] e; mean/rstd x2 [M] fp32; p [B, H, T, T]
// fp32 (+ pm in e when lowp); x2 [M, C] fp32; f [M, F] fp32; g [M, F] e; plus its input
// xs[l] [M, C] fp32. With checkpointing only xs[l] is kept per block and one BlockActs is
// shared (the recompute set). Keep this in step with nn/gpt.cc: tests/plan compares it with
// GptModel::activation_bytes() for several configurations.
ActivationPlan plan_transformer_activations(const TransformerShape& shape, int64_t micro_batch,
                                            DType compute_dtype, bool checkpoint, DeviceKind device,
                                            CpuGemm cpu_gemm) {
  shape.validate();
  ZS_CHECK(micro_batch >= 1, ErrorCode::kInvalidArgument, "micro-batch of {} sequences < 1",
           micro_batch);
  ActivationPlan a;
  a.counted = true;
  a.micro_batch = micro_batch;
  const int64_t B = micro_batch, T = shape.context, C = shape.width, H = shape.heads,
                F = shape.ffn_width(), V = shape.vocab, L = shape.layers;
  const int64_t M = B * T;
  a.tokens = M;
  const int64_t bhtt = B * H * T * T;
  if (shape.family == TransformerFamily::kGpt && device == DeviceKind::kCuda)
    return cuda_gpt_activations(a, B, T, C, H, F, V, L, compute_dtype, checkpoint);
  if (shape.family == TransformerFamily::kGpt) {
    a.exact = true;
    const bool lowp = compute_dtype == DType::kBF16;
    const int64_t e = lowp ? 2 : 4;
    const int64_t block_set = gpt_block_set(M, C, F, bhtt, e, lowp);
    const int64_t x = M * C * kF4;  // one block input xs[l]
    a.per_layer = x + block_set;
    a.per_layer_checkpointed = x;
    a.inputs = 2 * M * 4;  // int32 inputs and targets
    // xs has L + 1 slices: the last is the head's input, counted with the head.
    a.blocks = L * x + (checkpoint ? 0 : L * block_set);
    a.recompute = checkpoint ? block_set : 0;
    a.head = x + M * C * e + 2 * M * kF4 + M * V * kF4 + M * kF4 + V * kF4;
    const int64_t wide = std::max<int64_t>({F, 3 * C, V});
    int64_t w = M * 3 * C * kF4                               // qkv
                + bhtt * kF4 + M * C * kF4                    // att_s, att_o
                + M * C * e + (lowp ? bhtt * e : 0)           // att_dom, att_dsm
                + 3 * M * C * kF4                             // att_dq, dk, dv
                + M * C * kF4                                 // dres
                + M * wide * kF4 + (lowp ? M * wide * e : 0)  // dwide, dwide_mm
                + M * C * kF4 + (lowp ? M * C * e : 0);       // dnarrow, dnarrow_mm
    if (compute_dtype == DType::kF16) w += std::max<int64_t>({3 * C * C, F * C, V * C}) * kF4;
    w += 4 * std::max<int64_t>(F, 3 * C) * kF4;  // pscratch
    a.workspace = w;
    a.gemm_workspace = gpt_cpu_gemm_workspace_bytes(shape, B, compute_dtype, cpu_gemm);
  } else {
    // Estimate in the manner of Korthikanti et al. 2022 (no dropout, no sequence parallelism,
    // attention probabilities materialised), activations in the compute dtype (e bytes), per
    // layer e (8 M C + B H T^2 + 4 M F): [M, C] tensors: norm-1 input, QKV input, Q, K, V,
    // attention output, norm-2 input, MLP input; the probabilities; [M, F]: SwiGLU gate, up,
    // SiLU(gate), their product. Checkpointed: the layer input M C e.
    a.exact = false;
    const int64_t e = static_cast<int64_t>(dtype_size(compute_dtype));
    const int64_t block_set = e * (8 * M * C + bhtt + 4 * M * F);
    const int64_t x = M * C * e;
    a.per_layer = block_set;
    a.per_layer_checkpointed = x;
    a.inputs = 2 * M * 4;
    a.blocks = checkpoint ? L * x : L * block_set;
    a.recompute = checkpoint ? block_set : 0;
    a.head = x + M * V * kF4;   // final norm input, fp32 logits
    a.workspace = M * V * kF4;  // logits gradient
  }
  return a;
}

int64_t gpt_cpu_gemm_workspace_bytes(const TransformerShape& shape, int64_t micro_batch,
                                     DType compute_dtype, CpuGemm cpu_gemm) {
  const bool widen = compute_dtype == DType::kBF16 && cpu_gemm != CpuGemm::kOnednn;
  const bool product = cpu_gemm == CpuGemm::kEigen;
  if (!widen && !product) return 0;
  // nn/gemm.cc's layout: widened A, widened B, the product, each 64-byte aligned.
  struct Desc {
    int64_t batch, m, n, k;
    bool ta, tb;
    int64_t lda = 0, sa = 0, ldb = 0, sb = 0;  // 0: dense
  };
  auto extent = [](int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    if (ld == 0) ld = cols;
    if (stride == 0) stride = rows * ld;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
  };
  auto aligned = [](int64_t b) { return (b + 63) / 64 * 64; };
  auto gemm = [&](const Desc& d) {
    int64_t b = product ? aligned(kF4 * d.m * d.n) : 0;
    if (widen) {
      b += aligned(kF4 * extent(d.batch, d.ta ? d.k : d.m, d.ta ? d.m : d.k, d.lda, d.sa));
      b += aligned(kF4 * extent(d.batch, d.tb ? d.n : d.k, d.tb ? d.k : d.n, d.ldb, d.sb));
    }
    return b;
  };
  // nn/linear.cc: forward y = x W^T, backward data dx = dy W, backward weight dW = dy^T x;
  // widened (oneDNN), Linear::backward keeps dy widened for both, then max(W, x) after it.
  const int64_t M = micro_batch * shape.context;
  const bool pairs = cpu_gemm == CpuGemm::kOnednnWidened;
  auto linear = [&](int64_t in, int64_t out) {
    const int64_t pair =
        pairs ? aligned(kF4 * M * out) + aligned(kF4 * std::max(out * in, M * in)) : 0;
    return std::max({gemm({1, M, out, in, false, true}), gemm({1, M, in, out, false, false}),
                     gemm({1, out, in, M, true, false}), pair});
  };
  const int64_t C = shape.width, F = shape.ffn_width(), V = shape.vocab, T = shape.context;
  int64_t b = std::max({linear(C, 3 * C), linear(C, C), linear(C, F), linear(F, C), linear(C, V)});
  // nn/attention.cc: per (sequence, head) products, causal rows split at h = T/2 (T >= 16) into
  // a top part over keys [0, h) and a bottom part; qk and dp, pv and dq, dv and dk share shapes.
  const int64_t bh = micro_batch * shape.heads, D = C / shape.heads;
  const int64_t h = T >= 16 ? T / 2 : 0, tt = T * T, td = T * D;
  auto split = [&](const Desc& top, const Desc& bottom) {
    return std::max(h > 0 ? gemm(top) : 0, gemm(bottom));
  };
  b = std::max(b, split({bh, h, h, D, false, true, D, td, D, td},
                        {bh, T - h, T, D, false, true, D, td, D, td}));
  b = std::max(b, split({bh, h, D, h, false, false, T, tt, D, td},
                        {bh, T - h, D, T, false, false, T, tt, D, td}));
  b = std::max(b, split({bh, h, D, T, true, false, T, tt, D, td},
                        {bh, T - h, D, T - h, true, false, T, tt, D, td}));
  // Widened (oneDNN), nn::Attention widens each operand once per split pair: the larger span in
  // a slot of max(B H T T, B T C) floats, the smaller in one of B T C.
  if (pairs) b = std::max(b, aligned(kF4 * std::max(bh * tt, bh * td)) + aligned(kF4 * bh * td));
  return b;
}

int64_t MemoryPlan::bytes(MemCategory c) const {
  if (c == MemCategory::kActivations) return activations.total();
  if (c == MemCategory::kOther) return activations.pinned_host;
  return buffers.bytes(c);
}

int64_t MemoryPlan::model_states_bytes() const {
  int64_t b = 0;
  for (const UnitBufferPlan& u : buffers.units)
    b += u.params_bytes + u.grads_bytes + u.master_bytes + u.exp_avg_bytes + u.exp_avg_sq_bytes;
  return b;
}

int64_t MemoryPlan::device_bytes() const {
  return bytes(MemCategory::kParams) + bytes(MemCategory::kGrads) + bytes(MemCategory::kMaster) +
         bytes(MemCategory::kOptimizer) + bytes(MemCategory::kActivations) +
         bytes(MemCategory::kCommBuffers) + reserve_bytes;
}

MemoryPlan plan_memory(const ModelDesc& model, const PlanConfig& config) {
  config.validate();
  ZS_CHECK(!model.units.empty(), ErrorCode::kInvalidArgument, "the model has no units");
  std::vector<GroupLayout> layouts;
  layouts.reserve(model.units.size());
  for (const auto& u : model.units)
    layouts.push_back(compute_group_layout(u, config.world, config.engine.align));

  MemoryPlan p;
  p.buffers = plan_engine_buffers(layouts, config.engine, config.rank,
                                  /*on_device=*/config.device == DeviceKind::kCuda);
  p.world = config.world;
  p.ranks_per_node = config.ranks_per_node;
  p.stage = static_cast<int>(config.engine.stage);
  p.reserve_bytes = config.reserve_bytes;
  const int64_t P = static_cast<int64_t>(dtype_size(config.engine.precision.param_dtype));
  for (const GroupLayout& l : layouts) {
    p.num_params += l.numel;
    p.num_padded_params += l.padded_numel;
    p.params_shard_bytes += P * l.shard_numel;
  }
  p.params_full_bytes = P * p.num_padded_params;
  if (model.transformer) {
    const int64_t per_step = static_cast<int64_t>(config.world) * config.engine.micro_batches;
    const int64_t batch = config.global_batch > 0 ? config.global_batch : per_step;
    p.activations = plan_transformer_activations(
        *model.transformer, batch / per_step, config.engine.precision.param_dtype,
        config.checkpoint_activations, config.device, config.cpu_gemm);
  }
  return p;
}

std::vector<FitCandidate> fit_configurations(const ModelDesc& model, const PlanConfig& base,
                                             int64_t budget_bytes) {
  const int64_t per_rank_batch =
      base.global_batch > 0 ? base.global_batch / base.world : base.engine.micro_batches;
  ZS_CHECK(base.global_batch % base.world == 0, ErrorCode::kInvalidArgument,
           "batch {} must divide by the {} ranks", base.global_batch, base.world);
  const bool adam = base.engine.optimizer.kind == OptimizerKind::kAdamW;
  std::vector<FitCandidate> out;
  for (int stage = 0; stage <= 3; ++stage) {
    for (int offload = 0; offload <= 1; ++offload) {
      if (offload && (stage == 0 || !adam)) continue;
      for (int ckpt = 0; ckpt <= (model.transformer ? 1 : 0); ++ckpt) {
        for (int64_t mb = 1; mb <= per_rank_batch; ++mb) {
          if (per_rank_batch % mb != 0) continue;
          if (!model.transformer && mb > 1) break;  // activations unknown: micro-batches moot
          PlanConfig c = base;
          c.engine.stage = zero_stage_from_int(stage);
          c.engine.offload.optimizer = offload != 0;
          c.checkpoint_activations = ckpt != 0;
          c.engine.micro_batches = static_cast<int>(mb);
          c.global_batch = per_rank_batch * base.world;
          MemoryPlan plan = plan_memory(model, c);
          if (plan.device_bytes() > budget_bytes) continue;
          // Relative step-time penalty: stage 3's extra all-gather (1.5x communication), the
          // recompute of checkpointing (one more forward, ~1/3 of a step), the host update and
          // transfers of offload, and smaller matrix products with more micro-batches.
          const double cost = (stage == 3 ? 0.5 : 0.02 * stage) + (ckpt ? 0.33 : 0.0) +
                              (offload ? 1.0 : 0.0) + 0.05 * std::log2(static_cast<double>(mb));
          out.push_back({stage, offload != 0, ckpt != 0, static_cast<int>(mb), cost, plan});
        }
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const FitCandidate& a, const FitCandidate& b) {
    return a.cost < b.cost || (a.cost == b.cost && a.plan.device_bytes() < b.plan.device_bytes());
  });
  return out;
}

}  // namespace zs
