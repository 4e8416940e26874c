// Host launchers of the CUDA kernels that mirror the CPU layers (nn/kernels.h). C++17: included by
// the .cu files (nvcc) and by C++20 callers.
//
// Every launcher takes the stream it enqueues on, launches asynchronously (no host
// synchronization) and returns the launch's cudaError_t (cudaGetLastError after the launch, or
// cudaErrorInvalidValue for an argument it rejects). C++ callers turn it into zs::Error with
// zs::cuda_check (device/cuda/cuda_error.h). A sticky error left by an earlier asynchronous
// kernel (an illegal address, say) surfaces at the next launch and carries that launch's name:
// run with CUDA_LAUNCH_BLOCKING=1 to find the kernel that caused it. All pointers are device
// memory. Shapes as in nn/kernels.h: M rows (B*T tokens), C/V columns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "device/cuda/kernels/ops_kernels.h"
#include "nn/cuda/workspace_sizes.h"

namespace zs::nn::gpu {

constexpr int kMaxRow = 16384;  // the widest layer-norm row (model width) the kernels accept

// ---- layernorm.cu --------------------------------------------------------------------------
// out = (x - mean) * rstd * w + b per row (eps 1e-5), written in dt (fp32, bf16, fp16);
// mean, rstd [M] fp32 kept for backward. x [M, C] fp32.
cudaError_t layernorm_forward(const float* x, const float* w, const float* b, int64_t M, int C,
                              void* out, DType dt, float* mean, float* rstd, cudaStream_t stream);
// dx += dLN/dx; dw += sum_rows dy * xhat; db += sum_rows dy. The column sums are deterministic
// without atomics, as bias_backward's (fixed row chunks added in chunk order: the bits depend
// only on (M, C)); scratch: device memory of layernorm_backward_scratch_floats(M, C) floats,
// reused by every call on the stream.
cudaError_t layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                               const float* dy, int64_t M, int C, float* dx, float* dw, float* db,
                               float* scratch, cudaStream_t stream);

// ---- gelu.cu -------------------------------------------------------------------------------
// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in dt; x fp32 [n].
cudaError_t gelu_forward(const float* x, void* out, DType dt, int64_t n, cudaStream_t stream);
// dx = dy * gelu'(x); dx may alias dy.
cudaError_t gelu_backward(const float* x, const float* dy, float* dx, int64_t n,
                          cudaStream_t stream);

// ---- softmax.cu ----------------------------------------------------------------------------
// p[r, j] = softmax over j <= (r mod T) of s[r, :], 0 above the diagonal; s, p [BH*T, T] fp32.
// pm (may be null) receives p in mm_dtype as well (the GEMM input of P V).
cudaError_t causal_softmax_forward(const float* s, float* p, void* pm, DType mm_dtype, int64_t BH,
                                   int T, cudaStream_t stream);
// ds = p * (dp - sum_j p dp) per row; ds may alias dp. dsm (may be null) receives ds in mm_dtype.
cudaError_t causal_softmax_backward(const float* p, const float* dp, float* ds, void* dsm,
                                    DType mm_dtype, int64_t BH, int T, cudaStream_t stream);

// ---- cross_entropy.cu ----------------------------------------------------------------------
// Per row of logits [M, V] fp32: probs (may alias logits) = softmax, row_loss[i] = logsumexp -
// logit[target]. The mean loss is the caller's (sum row_loss, e.g. on the host after a copy).
cudaError_t cross_entropy_forward(const float* logits, const int32_t* targets, int64_t M, int V,
                                  float* probs, float* row_loss, cudaStream_t stream);
// dlogits = (probs - onehot(target)) * scale / M; dlogits may alias probs.
cudaError_t cross_entropy_backward(const float* probs, const int32_t* targets, int64_t M, int V,
                                   float scale, float* dlogits, cudaStream_t stream);

// ---- device/cuda/kernels -------------------------------------------------------------------
// The casts, fused AdamW and gradient statistics moved to the runtime side (the engine uses them
// through CudaDeviceOps, and the runtime does not depend on nn/); declared in
// device/cuda/kernels/ops_kernels.h and kept callable under their old names here.
using zs::gpu::adamw;
using zs::gpu::cast;
using zs::gpu::grad_stats;
using zs::gpu::kGradStatsBlocks;

// ---- attention.cu --------------------------------------------------------------------------
// qkv [B*T, 3C] fp32 (q | k | v, head h at columns h*hd) -> q, k, v [B, H, T, hd] in mm.
cudaError_t attention_split_heads(const float* qkv, void* q, void* k, void* v, DType mm, int B,
                                  int T, int C, int H, cudaStream_t stream);
// o [B, H, T, hd] fp32 -> out [B*T, C] in dt (merge heads).
cudaError_t attention_merge_heads(const float* o, void* out, DType dt, int B, int T, int C, int H,
                                  cudaStream_t stream);
// dout [B*T, C] fp32 -> dom [B, H, T, hd] in mm (split of the output gradient).
cudaError_t attention_split_grad(const float* dout, void* dom, DType mm, int B, int T, int C, int H,
                                 cudaStream_t stream);
// dq, dk, dv [B, H, T, hd] fp32 -> dqkv [B*T, 3C] fp32 (overwrites).
cudaError_t attention_merge_grads(const float* dq, const float* dk, const float* dv, float* dqkv,
                                  int B, int T, int C, int H, cudaStream_t stream);

// ---- embedding.cu --------------------------------------------------------------------------
// out[b*T + t, :] = wte[tokens[b*T + t], :] + wpe[t, :]; tokens [B*T] int32 in [0, vocab), wte
// [vocab, C] and wpe [T, C] in dt (fp32, bf16, fp16), out [B*T, C] fp32. Bitwise the CPU's.
cudaError_t embedding_forward(const int32_t* tokens, int B, int T, int C, const void* wte,
                              const void* wpe, DType dt, float* out, cudaStream_t stream);
// Host side of the deterministic embedding backward, run once per micro-batch on the host tokens:
// a stable counting sort of the M positions by token id. order [M]: positions grouped by id,
// ascending within an id; rows [<= M]: the distinct ids, ascending; offsets [rows + 1]: row r's
// positions are order[offsets[r] .. offsets[r+1]). counts: V + 1 ints of host scratch. Returns
// the number of distinct ids, or -1 for an id outside [0, V) or a bad size. O(M + V).
int embedding_grad_index(const int32_t* tokens, int64_t M, int V, int32_t* counts, int32_t* order,
                         int32_t* rows, int32_t* offsets);
// dwte[rows[r], :] += sum of dout[order[j], :] over row r's positions, in position order (the
// CPU's order: bitwise nn::embedding_backward); dwpe[t, :] += sum_b dout[b*T + t, :] in b order.
// order, rows, offsets: embedding_grad_index's output copied to the device, num_rows its return
// value. No atomics: deterministic. dout [B*T, C], dwte [vocab, C], dwpe [T, C] fp32.
cudaError_t embedding_backward(const int32_t* order, const int32_t* rows, const int32_t* offsets,
                               int num_rows, int B, int T, int C, const float* dout, float* dwte,
                               float* dwpe, cudaStream_t stream);

// ---- residual.cu ---------------------------------------------------------------------------
// out = a + b (fp32, n elements); out may alias either.
cudaError_t residual_add(const float* a, const float* b, float* out, int64_t n,
                         cudaStream_t stream);

// ---- bias_grad.cu --------------------------------------------------------------------------
// db[j] += sum_i dy[i, j], dy [M, N] fp32. Deterministic (no atomics): fixed row chunks whose
// partial sums are added in chunk order; the bits depend only on (M, N). scratch: device memory
// of bias_backward_scratch_floats(M, N) floats, reused by every call on the stream. The chunking
// and the scratch sizes (bias_backward_chunks, bias_backward_scratch_floats,
// layernorm_backward_scratch_floats) are in nn/cuda/workspace_sizes.h, plain C++ the GPT's
// buffer sizes (models/gpt/gpt_activations.cc) read in every build.
cudaError_t bias_backward(const float* dy, int64_t M, int N, float* db, float* scratch,
                          cudaStream_t stream);

}  // namespace zs::nn::gpu
