// The GPT's activation buffers, sized in one place: gpt_buffer_table() lists every buffer
// nn::GptModel (models/gpt/gpt.cc) and nn::CudaGptModel (models/gpt/cuda/gpt_cuda.cc) allocate in
// their constructors (models/gpt/gpt_buffers.h), which allocate from that very table, and the
// ActivationPlan (unit/activation_plan.h) both models report through zs::Model::activation_plan()
// and zs_plan prints is its sum.
//
// Plain host C++ in every build, with no CUDA header: the CUDA model's sizes need no CUDA (zs_plan
// --device cuda plans for a GPU on any machine); the scratch its kernels size comes from
// gpt_cuda_workspace(), which the CUDA model's folder defines. docs/memory.md writes the
// arithmetic out.
//
// [Note: GPT activations] M = B T tokens; e = the size of the matmul dtype mm: on the CPU mm is
// bf16 for bf16 compute and fp32 otherwise (fp16 products run in fp32), on CUDA mm is the compute
// dtype itself; lowp = mm is 16-bit. Kept per block: the block rows (GptBlockBuffers) plus the
// block's input xs[l] [M, C] fp32; with checkpointing only xs[l] is kept per block and one block
// set is shared (the recompute set, [Note: block activations] in models/gpt/gpt_state.h). Once per
// model: inputs, the head, temporaries shared by all units, and the matrix-product workspace.
//
// LoRA adapters ([Note: LoRA] in models/gpt/gpt_adapters.h, CPU only) of rank r on n targeted
// linears add, per kept block set, u = x A^T of each ([n][M, r] mm, GptBlockBuffers::lora_u: saved
// in forward for dB = s dy^T u, recomputed with the block under checkpointing) and, once per model,
// an [M, r] fp32 temporary (x A^T or dy B as the GEMM writes it) with its mm copy when lowp, and
// with fp16 compute one adapter's A and B converted to fp32; the GEMM workspace covers their
// products too.
//
// Functions of their arguments and of this machine: this_process_cpu_gemm() asks oneDNN once,
// and the GEMM scratchpads are oneDNN's for this CPU (gpt_cpu_gemm_scratchpad_bytes); thread-safe.
#pragma once

#include <cstdint>

#include "core/buffer.h"
#include "core/dtype.h"
#include "models/gpt/gpt_buffers.h"
#include "models/gpt/gpt_config.h"
#include "nn/int8_linear.h"
#include "unit/activation_plan.h"

namespace zs::nn {

// How the CPU GPT's matrix products run (nn/gemm.h, [Note: GEMM paths]); it decides the GEMM
// workspace GptModel allocates. A planner picks one; a model gets this_process_cpu_gemm().
enum class CpuGemm : uint8_t {
  kOnednn,         // oneDNN, bf16 products native: no workspace
  kOnednnWidened,  // oneDNN, bf16 operands widened to fp32 (AVX2 CPUs): widened A and B
  kEigen,          // Eigen build: bf16 widened, and an fp32 product per GEMM
};
// The path this process's GEMMs take (gemm_uses_onednn(), gemm_path(kBF16).widened).
CpuGemm this_process_cpu_gemm();

// What the GPT's buffers depend on: GptConfig's dimensions with the FFN width in elements (a
// planner may ask for any F; GptModel has F = ffn_mult * width). Not validated here: callers
// validate their config or shape.
struct GptActivationDims {
  int64_t batch = 1;    // B: sequences per micro-batch
  int64_t context = 1;  // T
  int64_t width = 1;    // C
  int64_t heads = 1;    // H
  int64_t ffn = 4;      // F
  int64_t vocab = 1;    // V
  int64_t layers = 1;   // L
  // The components ([Note: architecture components] in models/gpt/gpt_architecture.h).
  int64_t kv_heads = 0;  // 0: heads
  int64_t head_dim = 0;  // 0: width / heads (GptArchitecture::head_dim_override)
  bool qk_norm = false;  // per-head q/k RMSNorm: its saved input and statistics per block
  NormKind norm = NormKind::kLayerNorm;
  PositionKind positions = PositionKind::kLearned;
  MlpKind mlp = MlpKind::kGelu;
  bool qkv_bias = true, proj_bias = true, mlp_bias = true;
  bool tied_embeddings = false;  // no activation changes; the CUDA model refuses it
  DType compute_dtype = DType::kF32;
  bool checkpoint = false;
  int64_t lora_rank = 0;      // r; 0: no adapters
  uint32_t lora_targets = 0;  // bit t: GptLoraTarget t adapted (GptLoraConfig::target_mask())
  float lora_scale = 1.0f;    // s = alpha / r (GptLoraConfig::scaling()): the products' alpha
  bool int8_accept = false;   // GptAdapters::int8.accept ([Note: int8 base compute])
  float int8_outlier_threshold = 0.0f;
  // GptRunSettings::head_chunk: kGptHeadChunkAuto, kGptHeadChunkOff or rows ([Note: chunked head]
  // in nn/lm_head.h; the CPU model only, the CUDA model refuses a chunk of fewer than M rows).
  int64_t head_chunk = kGptHeadChunkAuto;
  // GptRunSettings::attention: the CPU model's attention kernel and its buffers.
  GptAttention attention = GptRunSettings{}.attention;
  // The OpenMP team GptModel builds its products for (GptRunConfig::threads; 0: default_threads()):
  // oneDNN sizes their scratchpads per thread.
  int threads = 0;

  int64_t lora_count() const;  // adapted linears per block (0 without adapters)

  int64_t tokens() const { return batch * context; }  // M
  // The rows of one CPU LM head chunk: gpt_head_chunk_rows(M, V, head_chunk).
  int64_t head_rows() const { return gpt_head_chunk_rows(tokens(), vocab, head_chunk); }
  // The CPU model computes attention with nn::FlashAttention (not on CUDA).
  bool fused_attention(DeviceKind device) const {
    return device == DeviceKind::kCpu && attention == GptAttention::kFused;
  }
  // The architecture these dimensions describe (ffn explicit, context and vocab as given).
  GptArchitecture arch() const;
  int64_t qkv_cols() const { return arch().qkv_rows(); }      // Q = D + 2 KV hd
  int64_t attn_width() const { return arch().attn_width(); }  // D = H hd
  int64_t fc_cols() const { return arch().fc_rows(); }        // G = F or 2F (SwiGLU)
  static GptActivationDims of(const GptConfig& c);
};

// The buffer table (models/gpt/gpt_buffers.h) of the model on `device`: kCpu, GptModel's (mm
// bf16 for bf16 compute, else fp32; the GEMM workspace is GemmWorkspace's own,
// gpt_cpu_gemm_workspace_bytes); kCuda, CudaGptModel's (mm the compute dtype, its device buffers,
// pinned staging and cuBLASLt workspace). One function for both devices: the rows the devices
// share are sized once. Throws on kCuda as check_gpt_cuda_buffers().
GptBufferTable gpt_buffer_table(const GptActivationDims& d, DeviceKind device);

// The Int8Linear of base linear `t` (qkv, proj, fc, fc_proj; [Note: int8 base compute]) as
// GptModel builds it: M tokens, bias, residual for proj and fc_proj, x in the CPU's mm,
// Int8Path::kAuto, backward-data on the dequantized weight.
Int8LinearDesc gpt_int8_linear_desc(const GptActivationDims& d, GptLoraTarget t);

// The GEMM workspace GptModel allocates (nn::GemmWorkspace, shared by all its products) when its
// products take `cpu_gemm`: the largest need of one product, widened bf16 A and B extents
// (64-byte aligned) when `cpu_gemm` widens and the compute dtype is bf16, a linear layer's
// backward pair and an attention split pair (Linear::backward_workspace_need,
// Attention::pair_workspace_need) on the widened oneDNN path, plus the fp32 m x n product for
// kEigen; with LoRA, the adapters' products too (LoraAdapter, nn/lora.h). oneDNN's own
// scratchpads are apart: gpt_cpu_gemm_scratchpad_bytes.
int64_t gpt_cpu_gemm_workspace_bytes(const GptActivationDims& d, CpuGemm cpu_gemm);

// oneDNN's scratchpads of every product GptModel builds ([Note: GEMM scratchpads] in nn/gemm.h):
// the five linears, attention, the LoRA adapters and the int8 base's layers, asked of this
// process's oneDNN for `cpu_gemm`'s input types under a ThreadScope of d.threads, as GptModel
// builds them. 0 for kEigen and in Eigen builds. The library picks these sizes for this CPU: a
// plan made on another CPU may differ by them (kOnednn on a CPU without native bf16 kernels: sized
// as the widened fp32 products this CPU runs).
int64_t gpt_cpu_gemm_scratchpad_bytes(const GptActivationDims& d, CpuGemm cpu_gemm);

// [Note: token upload] (models/gpt/cuda/gpt_cuda_state.h): inputs, targets and the
// embedding-gradient index (order, rows, offsets [M + 1]) in one int32 array of
// kCudaGptIdsPerToken M + 1 ids.
constexpr int64_t kCudaGptIdsPerToken = 5;

// The device scratch of CudaGptModel that its kernels and cuBLASLt size, not its shapes alone:
// gpt_cuda_workspace() is defined with the CUDA model (models/gpt/cuda/gpt_cuda_workspace.cc),
// host C++ built into zs_gpt in every build (zs_plan --device cuda plans for a GPU anywhere).
struct GptCudaWorkspace {
  int64_t bias_scratch = 0;      // bytes: column sums of bias_backward and layernorm_backward
  int64_t cublas_workspace = 0;  // bytes: CublasContext's workspace
};
GptCudaWorkspace gpt_cuda_workspace(const GptActivationDims& d);

// Throws zs::Error(kUnsupported) "cuda gpt: <component> is implemented on the CPU backend only"
// naming the first component of `d` the CUDA model lacks: RMSNorm, rotary positions, SwiGLU,
// grouped-query attention, a head_dim other than width / heads, q/k norms, a projection without
// bias (the CUDA model is GPT-2's).
void check_gpt_cuda_components(const GptActivationDims& d);

// Throws zs::Error(kInvalidArgument) when the ids do not fit int32 (too many tokens), and
// zs::Error(kUnsupported) for LoRA adapters (check_gpt_lora_device, models/gpt/gpt_adapters.h) or
// a component the CUDA model lacks (check_gpt_cuda_components).
void check_gpt_cuda_buffers(const GptActivationDims& d);

// The GPT's activations on `device`: kCpu, GptModel's (its GEMM workspace for `cpu_gemm`); kCuda,
// CudaGptModel's under kActivations (the cuBLASLt workspace included) and its pinned host bytes.
// counted and exact are set. The sum of gpt_buffer_table(d, device). Throws as
// check_gpt_cuda_buffers() on kCuda.
ActivationPlan gpt_activation_plan(const GptActivationDims& d, DeviceKind device,
                                   CpuGemm cpu_gemm = CpuGemm::kOnednn);
// The same for a model's config: what GptModel (kCpu) or CudaGptModel (kCuda) built from `config`
// allocates; their activation_plan().
ActivationPlan gpt_activation_plan(const GptConfig& config, DeviceKind device,
                                   CpuGemm cpu_gemm = CpuGemm::kOnednn);

}  // namespace zs::nn
