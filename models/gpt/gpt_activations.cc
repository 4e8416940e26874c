#include "models/gpt/gpt_activations.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/flash_attention.h"
#include "nn/gemm.h"
#include "nn/linear.h"
#include "nn/lm_head.h"
#include "nn/lora.h"
#include "nn/threads.h"

namespace zs::nn {

namespace {

constexpr int64_t kF4 = 4;  // fp32 and int32

int64_t aligned64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The CPU model's matmul dtype: bf16 for bf16 compute, else fp32 (fp16 products run in fp32).
DType cpu_mm(const GptActivationDims& d) {
  return d.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

// models/gpt/gpt.cc's Linears: qkv, proj, fc, fc_proj on M rows, and the LM head's (nn/lm_head.h)
// on its chunk's rows and, when the chunk does not divide M, on the last chunk's.
struct LinearShape {
  int64_t rows = 0;
  int in = 0, out = 0;
  bool bias = false, residual = false;
};
std::vector<LinearShape> gpt_linear_shapes(const GptActivationDims& d) {
  const int64_t M = d.tokens();
  const int C = static_cast<int>(d.width), F = static_cast<int>(d.ffn);
  const int D = static_cast<int>(d.attn_width());
  std::vector<LinearShape> v = {
      LinearShape{M, C, static_cast<int>(d.qkv_cols()), d.qkv_bias, false},
      LinearShape{M, D, C, d.proj_bias, true},
      LinearShape{M, C, static_cast<int>(d.fc_cols()), d.mlp_bias, false},
      LinearShape{M, F, C, d.mlp_bias, true}};
  for (int64_t rows : LmHead::linear_rows(M, d.head_rows()))
    v.push_back(LinearShape{rows, C, static_cast<int>(d.vocab), false, false});
  return v;
}

// models/gpt/gpt.cc's LoRA adapters: one per adapted linear, its output rows base_out apart.
struct LoraShape {
  int64_t in = 0, out = 0, base_out = 0;
};
std::vector<LoraShape> gpt_lora_shapes(const GptActivationDims& d) {
  std::vector<LoraShape> v;
  for (int t = 0; t < kNumGptLoraTargets && d.lora_count() > 0; ++t) {
    if (!((d.lora_targets >> t) & 1u)) continue;
    const auto target = static_cast<GptLoraTarget>(t);
    LoraShape l;
    int64_t base_in = 0;
    gpt_lora_linear_shape(target, d.arch(), &l.in, &l.out);
    gpt_lora_linear_shape(gpt_lora_base_linear(target), d.arch(), &base_in, &l.base_out);
    v.push_back(l);
  }
  return v;
}

// The GEMM attention's products (none with fused attention: the CPU model builds no Attention).
std::vector<Attention::SplitDescs> attention_descs(const GptActivationDims& d) {
  if (d.fused_attention(DeviceKind::kCpu)) return {};
  const std::array<Attention::SplitDescs, 6> a =
      Attention::gemm_descs(static_cast<int>(d.batch), static_cast<int>(d.context),
                            static_cast<int>(d.attn_width()), static_cast<int>(d.heads), cpu_mm(d));
  return {a.begin(), a.end()};
}

}  // namespace

CpuGemm this_process_cpu_gemm() {
  if (!gemm_uses_onednn()) return CpuGemm::kEigen;
  return gemm_path(DType::kBF16).widened ? CpuGemm::kOnednnWidened : CpuGemm::kOnednn;
}

GptActivationDims GptActivationDims::of(const GptConfig& c) {
  GptActivationDims d;
  d.batch = c.run.batch;
  d.context = c.arch.context;
  d.width = c.arch.width;
  d.heads = c.arch.heads;
  d.ffn = c.arch.ffn_width();
  d.vocab = c.arch.vocab;
  d.layers = c.arch.layers;
  d.kv_heads = c.arch.kv_heads;
  d.head_dim = c.arch.head_dim_override;
  d.qk_norm = c.arch.qk_norm;
  d.norm = c.arch.norm;
  d.positions = c.arch.positions;
  d.mlp = c.arch.mlp;
  d.qkv_bias = c.arch.qkv_bias;
  d.proj_bias = c.arch.proj_bias;
  d.mlp_bias = c.arch.mlp_bias;
  d.tied_embeddings = c.arch.tied_embeddings;
  d.compute_dtype = c.run.compute_dtype;
  d.checkpoint = c.run.checkpoint_activations;
  d.lora_rank = c.adapters.lora.rank;
  d.lora_targets = c.adapters.lora.target_mask();
  if (c.adapters.lora.enabled()) d.lora_scale = c.adapters.lora.scaling();
  d.int8_accept = c.adapters.int8.accept;
  d.int8_outlier_threshold = c.adapters.int8.outlier_threshold;
  d.threads = c.run.threads;
  d.head_chunk = c.run.head_chunk;
  d.attention = c.run.attention;
  return d;
}

GptArchitecture GptActivationDims::arch() const {
  GptArchitecture a;
  a.layers = static_cast<int>(layers);
  a.heads = static_cast<int>(heads);
  a.width = static_cast<int>(width);
  a.context = static_cast<int>(context);
  a.vocab = static_cast<int>(vocab);
  a.ffn = static_cast<int>(ffn);
  a.kv_heads = static_cast<int>(kv_heads);
  a.head_dim_override = static_cast<int>(head_dim);
  a.qk_norm = qk_norm;
  a.norm = norm;
  a.positions = positions;
  a.mlp = mlp;
  a.qkv_bias = qkv_bias;
  a.proj_bias = proj_bias;
  a.mlp_bias = mlp_bias;
  a.tied_embeddings = tied_embeddings;
  return a;
}

int64_t GptActivationDims::lora_count() const {
  return lora_rank > 0 ? std::popcount(lora_targets) : 0;
}

int64_t GptBufferTable::block_bytes() const {
  int64_t b = 0;
  for (const GptBufferRow<GptBlockBuffers>& r : block) b += r.bytes;
  return b;
}

int64_t GptBufferTable::bytes(GptBufferPart part) const {
  int64_t b = 0;
  for (const GptBufferRow<GptModelBuffers>& r : model)
    if (r.part == part) b += r.bytes;
  return b;
}

int64_t GptBufferTable::row(const char* name) const {
  for (const GptBufferRow<GptModelBuffers>& r : model)
    if (std::strcmp(r.name, name) == 0) return r.bytes;
  for (const GptBufferRow<GptBlockBuffers>& r : block)
    if (std::strcmp(r.name, name) == 0) return r.bytes;
  return 0;
}

GptBufferTable gpt_buffer_table(const GptActivationDims& d, DeviceKind device) {
  const bool cuda = device == DeviceKind::kCuda;
  if (cuda) check_gpt_cuda_buffers(d);
  const int64_t M = d.tokens(), C = d.width, F = d.ffn, V = d.vocab, L = d.layers;
  const int64_t Q = d.qkv_cols(), G = d.fc_cols(), D = d.attn_width();
  const GptArchitecture arch = d.arch();
  // Per-head q/k norm: the q and k heads' inputs [M, (H + KV) hd] and statistics [M, H + KV].
  const int64_t qk_heads = d.qk_norm ? d.heads + arch.kv_heads_or_heads() : 0;
  // Fused attention keeps O (the block's `a`) and a log-sum-exp per query row instead of the
  // [B, H, T, T] probabilities, K and V at their KV heads, and one tile set per thread.
  const bool fused = d.fused_attention(device);
  const int64_t bhtt = fused ? 0 : d.batch * d.heads * d.context * d.context;
  const int64_t att_md = fused ? 0 : M * D;  // the GEMM attention's [M, D] temporaries
  const int64_t att_tiles =
      fused ? FlashAttention::tiles_bytes(static_cast<int>(arch.head_dim()),
                                          d.threads > 0 ? d.threads : default_threads())
            : 0;
  GptBufferTable t;
  t.mm = cuda ? d.compute_dtype : cpu_mm(d);
  const int64_t e = static_cast<int64_t>(dtype_size(t.mm));
  const bool lowp = t.mm != DType::kF32;
  const bool layernorm = d.norm == NormKind::kLayerNorm;
  const bool lora = d.lora_count() > 0;
  // The gradient temporaries' width: the CPU's also holds the head's [M, V] gradient, or its mm
  // copy of one chunk's [R, V] when the head chunks ([Note: chunked head] in nn/lm_head.h).
  const int64_t wide = std::max(G, Q);
  const int64_t cpu_wide = std::max(wide, V);
  t.block_sets = d.checkpoint ? 1 : L;
  t.block_input = M * C * kF4;
  t.head_rows = cuda ? M : d.head_rows();
  const int64_t R = t.head_rows;
  const bool chunked = R < M;
  const int64_t cpu_dwide = chunked ? M * wide : M * cpu_wide;
  const int64_t cpu_dwide_mm = std::max(M * wide, R * V);
  // The CUDA slots are 256-byte aligned (CudaGemm::run() wants aligned biases).
  t.pscratch_stride = cuda ? (wide + 63) / 64 * 64 : wide;

  // fp16 compute with LoRA: the largest adapter's A and B in fp32.
  int64_t lora_wscratch = 0;
  for (int i = 0; i < kNumGptLoraTargets && lora && d.compute_dtype == DType::kF16; ++i) {
    if (!((d.lora_targets >> i) & 1u)) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(static_cast<GptLoraTarget>(i), d.arch(), &in, &out);
    lora_wscratch = std::max(lora_wscratch, d.lora_rank * (in + out) * kF4);
  }

  using P = GptBufferPart;
  using B = GptModelBuffers;
  const int64_t ids = cuda ? (kCudaGptIdsPerToken * M + 1) * kF4 : 0;
  const GptCudaWorkspace ws = cuda ? gpt_cuda_workspace(d) : GptCudaWorkspace{};
  t.model = {
      {"inputs", &B::inputs, cuda ? 0 : M * kF4, P::kInputs},
      {"targets", &B::targets, cuda ? 0 : M * kF4, P::kInputs},
      {"ids", &B::ids, ids, P::kInputs},
      {"staging0", &B::staging0, ids, P::kPinnedHost},
      {"staging1", &B::staging1, ids, P::kPinnedHost},
      {"row_loss_host", &B::row_loss_host, cuda ? M * kF4 : 0, P::kPinnedHost},
      {"logits_host", &B::logits_host, cuda ? V * kF4 : 0, P::kPinnedHost},
      {"xs", &B::xs, (L + 1) * t.block_input, P::kBlockInputs},
      {"hf", &B::hf, M * C * e, P::kHead},
      {"meanf", &B::meanf, layernorm ? M * kF4 : 0, P::kHead},
      {"rstdf", &B::rstdf, M * kF4, P::kHead},
      {"logits", &B::logits, R * V * kF4, P::kHead},
      {"row_loss", &B::row_loss, M * kF4, P::kHead},
      {"last_logits", &B::last_logits, cuda ? 0 : V * kF4, P::kHead},
      {"qkv", &B::qkv, M * Q * kF4, P::kWorkspace},
      {"att_s", &B::att_s, bhtt * kF4, P::kWorkspace},
      {"att_o", &B::att_o, att_md * kF4, P::kWorkspace},
      {"att_dom", &B::att_dom, att_md * e, P::kWorkspace},
      {"att_dsm", &B::att_dsm, lowp ? bhtt * e : 0, P::kWorkspace},
      {"att_dq", &B::att_dq, att_md * kF4, P::kWorkspace},
      {"att_dk", &B::att_dk, att_md * kF4, P::kWorkspace},
      {"att_dv", &B::att_dv, att_md * kF4, P::kWorkspace},
      {"att_tiles", &B::att_tiles, att_tiles, P::kWorkspace},
      {"dres", &B::dres, M * C * kF4, P::kWorkspace},
      {"dwide", &B::dwide, (cuda ? M * wide : cpu_dwide) * kF4, P::kWorkspace},
      {"dwide_mm", &B::dwide_mm, lowp ? (cuda ? M * cpu_wide : cpu_dwide_mm) * e : 0,
       P::kWorkspace},
      {"dnarrow", &B::dnarrow, M * std::max(C, D) * kF4, P::kWorkspace},
      {"dnarrow_mm", &B::dnarrow_mm, lowp ? M * C * e : 0, P::kWorkspace},
      {"dmlp", &B::dmlp, d.mlp == MlpKind::kSwiGLU ? M * F * kF4 : 0, P::kWorkspace},
      {"wscratch", &B::wscratch,
       !cuda && d.compute_dtype == DType::kF16
           ? std::max<int64_t>({Q * C, G * C, F * C, V * C}) * kF4
           : 0,
       P::kWorkspace},
      {"pscratch", &B::pscratch, 4 * t.pscratch_stride * kF4, P::kWorkspace},
      {"lora_t", &B::lora_t, lora ? M * d.lora_rank * kF4 : 0, P::kWorkspace},
      {"lora_t_mm", &B::lora_t_mm, lora && lowp ? M * d.lora_rank * e : 0, P::kWorkspace},
      {"lora_wscratch", &B::lora_wscratch, lora_wscratch, P::kWorkspace},
      {"bias_scratch", &B::bias_scratch, ws.bias_scratch, P::kWorkspace},
  };

  using K = GptBlockBuffers;
  const int64_t mce = M * C * e, mde = M * D * e;
  const int64_t kve = fused ? M * arch.kv_heads_or_heads() * arch.head_dim() * e : mde;
  const int64_t kvt = fused ? d.batch * arch.kv_heads_or_heads() * arch.head_dim() *
                                  FlashAttention::padded_context(static_cast<int>(d.context)) * e
                            : 0;
  const int64_t stat = M * kF4;
  t.block = {
      {"h1", &K::h1, mce, P::kWorkspace},
      {"mean1", &K::mean1, layernorm ? stat : 0, P::kWorkspace},
      {"rstd1", &K::rstd1, stat, P::kWorkspace},
      {"q", &K::q, mde, P::kWorkspace},
      {"k", &K::k, kve, P::kWorkspace},
      {"v", &K::v, kve, P::kWorkspace},
      {"qk_x", &K::qk_x, M * qk_heads * arch.head_dim() * kF4, P::kWorkspace},
      {"qk_rstd", &K::qk_rstd, M * qk_heads * kF4, P::kWorkspace},
      {"p", &K::p, bhtt * kF4, P::kWorkspace},
      {"pm", &K::pm, lowp ? bhtt * e : 0, P::kWorkspace},
      {"lse", &K::lse, fused ? M * d.heads * kF4 : 0, P::kWorkspace},
      {"kt", &K::kt, kvt, P::kWorkspace},
      {"vt", &K::vt, kvt, P::kWorkspace},
      {"a", &K::a, mde, P::kWorkspace},
      {"x2", &K::x2, M * C * kF4, P::kWorkspace},
      {"h2", &K::h2, mce, P::kWorkspace},
      {"mean2", &K::mean2, layernorm ? stat : 0, P::kWorkspace},
      {"rstd2", &K::rstd2, stat, P::kWorkspace},
      {"f", &K::f, M * G * kF4, P::kWorkspace},
      {"g", &K::g, M * F * e, P::kWorkspace},
      {"lora_u", &K::lora_u, d.lora_count() * M * d.lora_rank * e, P::kWorkspace},
  };

  if (!cuda && d.int8_accept) {
    const bool int8 = Int8Linear::resolves_to_int8(Int8Path::kAuto);
    for (int i = 0; i < kNumGptLinears; ++i) {
      const Int8LinearDesc l = gpt_int8_linear_desc(d, static_cast<GptLoraTarget>(i));
      t.int8_ws = std::max(t.int8_ws, Int8Linear::workspace_need(l, int8, false));
    }
  }
  t.cublas_workspace = ws.cublas_workspace;
  return t;
}

Int8LinearDesc gpt_int8_linear_desc(const GptActivationDims& d, GptLoraTarget t) {
  Int8LinearDesc l;
  l.M = d.tokens();
  gpt_lora_linear_shape(t, d.arch(), &l.in, &l.out);
  l.bias = t == GptLoraTarget::kQkv    ? d.qkv_bias
           : t == GptLoraTarget::kProj ? d.proj_bias
                                       : d.mlp_bias;
  l.residual = t == GptLoraTarget::kProj || t == GptLoraTarget::kFcProj;
  l.mm = d.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  l.path = Int8Path::kAuto;
  l.backward = Int8Backward::kDequantize;
  l.outlier_threshold = d.int8_outlier_threshold;
  return l;
}

int64_t gpt_cpu_gemm_workspace_bytes(const GptActivationDims& d, CpuGemm cpu_gemm) {
  const bool widen = d.compute_dtype == DType::kBF16 && cpu_gemm != CpuGemm::kOnednn;
  const bool product = cpu_gemm == CpuGemm::kEigen;
  if (!widen && !product) return 0;
  // One product's need, as nn/gemm.cc lays out its workspace: widened A, widened B, the product,
  // each 64-byte aligned.
  auto need = [&](const GemmDesc& g) {
    int64_t b = product ? aligned64(kF4 * g.m * g.n) : 0;
    if (widen) b += aligned64(kF4 * g.a_extent()) + aligned64(kF4 * g.b_extent());
    return b;
  };
  // nn/linear.cc: forward y = x W^T, backward data dx = dy W, backward weight dW = dy^T x; on the
  // widened oneDNN path Linear::backward keeps dy widened for both, then max(W, x) after it.
  const int64_t M = d.tokens();
  const bool pairs = cpu_gemm == CpuGemm::kOnednnWidened;
  int64_t b = 0;
  const DType mm = cpu_mm(d);
  for (const LinearShape& l : gpt_linear_shapes(d)) {
    for (const GemmDesc& g : Linear::gemm_descs(l.rows, l.in, l.out, l.bias, l.residual, mm))
      b = std::max(b, need(g));
    if (pairs)
      b = std::max(b, static_cast<int64_t>(Linear::backward_workspace_need(l.rows, l.in, l.out)));
  }
  // nn/lora.cc: LoraAdapter's six products per adapted linear, each its own Gemm.
  for (const LoraShape& l : gpt_lora_shapes(d))
    for (const GemmDesc& g :
         LoraAdapter::gemm_descs(M, l.in, l.out, d.lora_rank, l.base_out, mm, d.lora_scale))
      b = std::max(b, need(g));
  // nn/attention.cc: per (sequence, head) products, causal rows split ([Note: causal split]);
  // none with fused attention.
  for (const Attention::SplitDescs& s : attention_descs(d)) {
    if (s.has_top) b = std::max(b, need(s.top));
    b = std::max(b, need(s.bottom));
  }
  // On the widened oneDNN path nn::Attention widens each operand once per split pair.
  if (pairs && !d.fused_attention(DeviceKind::kCpu)) {
    b = std::max(b, static_cast<int64_t>(Attention::pair_workspace_need(
                        static_cast<int>(d.batch), static_cast<int>(d.context),
                        static_cast<int>(d.attn_width()), static_cast<int>(d.heads))));
  }
  return b;
}

int64_t gpt_cpu_gemm_scratchpad_bytes(const GptActivationDims& d, CpuGemm cpu_gemm) {
  if (cpu_gemm == CpuGemm::kEigen || !gemm_uses_onednn()) return 0;
  const DType mm = cpu_mm(d);
  // A plan for native bf16 products made on a CPU that has none (planning for another machine):
  // oneDNN cannot describe a kernel it lacks, so the scratchpads are sized as the fp32 kernels'
  // this CPU runs, the products' only description at hand.
  const bool widened = cpu_gemm == CpuGemm::kOnednnWidened ||
                       (mm == DType::kBF16 && gemm_path(DType::kBF16).widened);
  ThreadScope scope(d.threads > 0 ? d.threads : default_threads());  // as GptModel's constructor
  const int64_t M = d.tokens();
  int64_t b = 0;
  auto add = [&](const GemmDesc& g) {
    b += static_cast<int64_t>(gemm_scratchpad_bytes(g, widened));
  };
  for (const LinearShape& l : gpt_linear_shapes(d))
    for (const GemmDesc& g : Linear::gemm_descs(l.rows, l.in, l.out, l.bias, l.residual, mm))
      add(g);
  for (const Attention::SplitDescs& s : attention_descs(d)) {
    if (s.has_top) add(s.top);
    add(s.bottom);
  }
  for (const LoraShape& l : gpt_lora_shapes(d))
    for (const GemmDesc& g :
         LoraAdapter::gemm_descs(M, l.in, l.out, d.lora_rank, l.base_out, mm, d.lora_scale))
      add(g);
  if (d.int8_accept) {  // [Note: int8 base compute]
    const bool int8 = Int8Linear::resolves_to_int8(Int8Path::kAuto);
    for (int t = 0; t < kNumGptLinears; ++t)
      b += Int8Linear::scratchpad_need(gpt_int8_linear_desc(d, static_cast<GptLoraTarget>(t)), int8,
                                       false, widened);
  }
  return b;
}

void check_gpt_cuda_components(const GptActivationDims& d) {
  auto refuse = [](bool lacking, const std::string& what) {
    ZS_CHECK(!lacking, ErrorCode::kUnsupported,
             "cuda gpt: {} is implemented on the CPU backend only (run with --device cpu)", what);
  };
  refuse(d.norm != NormKind::kLayerNorm, "RMSNorm (norm rmsnorm)");
  refuse(d.positions != PositionKind::kLearned, "rotary position embedding (positions rotary)");
  refuse(d.mlp != MlpKind::kGelu, "the SwiGLU MLP (mlp swiglu)");
  refuse(d.kv_heads != 0 && d.kv_heads != d.heads,
         fmt::format("grouped-query attention (kv_heads {} of heads {})", d.kv_heads, d.heads));
  refuse(d.head_dim != 0 && d.head_dim * d.heads != d.width,
         fmt::format("a head_dim other than width / heads (head_dim {}, width {}, heads {})",
                     d.head_dim, d.width, d.heads));
  refuse(d.qk_norm, "per-head q/k RMSNorm (qk_norm)");
  refuse(!(d.qkv_bias && d.proj_bias && d.mlp_bias),
         fmt::format("a block without some biases (qkv_bias {}, proj_bias {}, mlp_bias {})",
                     d.qkv_bias, d.proj_bias, d.mlp_bias));
  // The engine's ties are device-neutral, but the CUDA model's head has not run tied on a GPU.
  refuse(d.tied_embeddings, "tied embeddings (tied_embeddings)");
}

void check_gpt_cuda_buffers(const GptActivationDims& d) {
  check_gpt_lora_device(d.lora_rank, DeviceKind::kCuda);
  ZS_CHECK(d.head_chunk <= 0 || d.head_chunk >= d.tokens(), ErrorCode::kUnsupported,
           "cuda gpt: a chunked LM head (head_chunk {} of {} rows) is implemented on the CPU "
           "backend only (run with --device cpu, or --head-chunk off)",
           d.head_chunk, d.tokens());
  check_gpt_cuda_components(d);
  ZS_CHECK(kCudaGptIdsPerToken * d.tokens() + 1 <= std::numeric_limits<int32_t>::max(),
           ErrorCode::kInvalidArgument, "cuda gpt: batch x context = {} tokens is too many",
           d.tokens());
}

ActivationPlan gpt_activation_plan(const GptActivationDims& d, DeviceKind device,
                                   CpuGemm cpu_gemm) {
  ActivationPlan a;
  a.counted = true;
  a.exact = true;
  a.checkpointed = d.checkpoint;
  a.micro_batch = d.batch;
  a.tokens = d.tokens();
  // The kept blocks (the block inputs xs[0..L-1] and the block sets) and the recompute set; xs[L],
  // the head's input, counts with the head.
  const GptBufferTable t = gpt_buffer_table(d, device);
  const int64_t block = t.block_bytes();
  const int64_t sets = t.block_sets * block;
  a.per_layer = t.block_input + block;
  a.per_layer_checkpointed = t.block_input;
  a.blocks = d.layers * t.block_input + (d.checkpoint ? 0 : sets);
  a.recompute = d.checkpoint ? sets : 0;
  a.inputs = t.bytes(GptBufferPart::kInputs);
  a.head = t.bytes(GptBufferPart::kBlockInputs) - d.layers * t.block_input +
           t.bytes(GptBufferPart::kHead);
  a.workspace = t.bytes(GptBufferPart::kWorkspace) + t.int8_ws;
  a.pinned_host = t.bytes(GptBufferPart::kPinnedHost);
  if (device == DeviceKind::kCuda) {
    a.gemm_workspace = t.cublas_workspace;
    return a;
  }
  a.gemm_workspace = gpt_cpu_gemm_workspace_bytes(d, cpu_gemm);
  a.gemm_scratchpads = gpt_cpu_gemm_scratchpad_bytes(d, cpu_gemm);
  return a;
}

ActivationPlan gpt_activation_plan(const GptConfig& config, DeviceKind device, CpuGemm cpu_gemm) {
  return gpt_activation_plan(GptActivationDims::of(config), device, cpu_gemm);
}

}  // namespace zs::nn
