// Host launchers of the CUDA kernels that mirror the CPU layers (nn/kernels.h) and the optimizer
// (optim/adamw.h, optim/clip.h). C++17: included by the .cu files (nvcc) and by C++20 callers.
//
// Every launcher takes the stream it enqueues on, launches asynchronously (no host
// synchronization) and returns the launch's cudaError_t (cudaGetLastError after the launch, or
// cudaErrorInvalidValue for an argument it rejects). C++ callers turn it into zs::Error with
// zs::cuda_check (runtime/cuda/cuda_error.h). All pointers are device memory. Shapes as in
// nn/kernels.h: M rows (B*T tokens), C/V columns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "optim/adamw.h"
#include "runtime/core/dtype.h"

namespace zs::nn::gpu {

constexpr int kMaxRow = 16384;  // the widest row (width, vocab) the row kernels accept

// ---- layernorm.cu --------------------------------------------------------------------------
// out = (x - mean) * rstd * w + b per row (eps 1e-5), written in dt (fp32, bf16, fp16);
// mean, rstd [M] fp32 kept for backward. x [M, C] fp32.
cudaError_t layernorm_forward(const float* x, const float* w, const float* b, int64_t M, int C,
                              void* out, DType dt, float* mean, float* rstd, cudaStream_t stream);
// dx += dLN/dx; dw += sum_rows dy * xhat; db += sum_rows dy (column sums in row order: the
// result does not depend on the launch configuration).
cudaError_t layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                               const float* dy, int64_t M, int C, float* dx, float* dw, float* db,
                               cudaStream_t stream);

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

// ---- cast.cu -------------------------------------------------------------------------------
// dst[i] = src[i] converted (fp32, bf16, fp16 either way; round to nearest even, the CPU's
// convert.h rounding). src and dst must not overlap unless the dtypes are equal and src == dst.
cudaError_t cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream);

// ---- adamw.cu ------------------------------------------------------------------------------
// optim::adamw_reference on a device shard, in [Note: AdamW operation order], bit for bit the CPU
// result (no FMA contraction: __fmul_rn/__fadd_rn/__fdiv_rn/__fsqrt_rn). Same arguments and
// aliasing rules as adamw_reference; grad in fp32/bf16/fp16, out (may be null) in fp32/bf16/fp16.
cudaError_t adamw(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
                  const optim::AdamWStep& s, void* out, DType out_dtype, cudaStream_t stream);

// ---- grad_stats.cu -------------------------------------------------------------------------
// The device side of optim::span_stats: sum of squares in fp64 and a non-finite flag.
// Deterministic for a given n (fixed grid, partials summed in block order) but not in the CPU's
// element order, so it matches span_stats within fp64 rounding, not bitwise.
// scratch: kGradStatsBlocks doubles of device memory (block partials and a flag). With accumulate,
// *sum_squares += and *nonfinite |=; else they are overwritten. sum_squares [1] fp64, nonfinite [1]
// int (0 or 1).
constexpr int kGradStatsBlocks = 256;
cudaError_t grad_stats(const void* data, DType dtype, int64_t n, double* scratch,
                       double* sum_squares, int* nonfinite, bool accumulate, cudaStream_t stream);

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

}  // namespace zs::nn::gpu
