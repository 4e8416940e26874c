// Host launchers of the kernels behind the runtime's element-wise work on its own buffers
// (device/device_ops.h, CudaDeviceOps): casts, accumulation, fused AdamW, SGD with momentum and
// gradient statistics. Library zs_cuda_kernels; it depends on nothing in nn/ (zs_nn_cuda links it
// and re-exports the older launchers under zs::nn::gpu).
//
// Every launcher takes the stream it enqueues on, launches asynchronously (no host
// synchronization) and returns the launch's cudaError_t (cudaGetLastError after the launch, or
// cudaErrorInvalidValue for an argument it rejects, before enqueuing anything). C++ callers turn
// it into zs::Error with zs::cuda_check (device/cuda/cuda_error.h). All pointers are device
// memory. Float dtypes are fp32, bf16 and fp16; 16-bit values are read exactly and written with
// the rounding of core/convert.h, NaNs included (core/convert_bits.h).
//
// Bits: cast, accumulate, adamw and sgd compute every element independently with explicitly
// rounded fp32 operations (__fadd_rn, __fmul_rn, ...: no FMA contraction), so their results do
// not depend on the launch configuration and equal the CPU's (convert.h, optim::adamw_reference,
// optim::sgd_update) bit for bit for every non-NaN result. A NaN *produced by arithmetic* is the
// GPU's canonical NaN (0x7fffffff), where the CPU propagates an input NaN's sign and payload: such
// elements are NaN on both, with possibly different bits.
//
// C++17: included by the .cu files (nvcc) and by C++20 callers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace zs::gpu {

// ---- cast.cu -------------------------------------------------------------------------------
// dst[i] = src[i] converted (fp32, bf16, fp16 either way; convert.h's rounding). src and dst must
// not overlap unless the dtypes are equal and src == dst (a no-op). Equal dtypes: a device copy.
cudaError_t cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream);

// ---- accumulate.cu -------------------------------------------------------------------------
// dst[i] = round_{dst_dtype}(float(dst[i]) + float(src[i])): one fp32 addition, one rounding.
// src_dtype is dst_dtype or fp32; src may equal dst (same dtype), must not overlap it otherwise.
cudaError_t accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                       cudaStream_t stream);

// ---- adamw.cu ------------------------------------------------------------------------------
// optim::adamw_reference on a device shard, in [Note: AdamW operation order]. Same arguments and
// aliasing rules as adamw_reference; grad in fp32/bf16/fp16, out (may be null) in fp32/bf16/fp16.
cudaError_t adamw(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
                  const optim::AdamWStep& s, void* out, DType out_dtype, cudaStream_t stream);

// ---- adamw_int8_states.cu ------------------------------------------------------------------
// optim::adamw_int8_states_reference with the float8 code book (StateCode::kFloat8) on a device
// shard: m and v as codes [n] and fp32 scales [ceil(n / block)] (device memory; the shard starts
// at a state block boundary), block a power of two >= 64, grad and out as adamw's. The bits of the
// CPU reference (see Bits above; a NaN moment block is NaN scale and codes 0 on both).
// cudaErrorInvalidValue for a bad block or dtype. The dynamic code book has no CUDA kernel.
cudaError_t adamw_int8_states(float* p, const void* grad, DType grad_dtype, uint8_t* m_codes,
                              float* m_scales, uint8_t* v_codes, float* v_scales, int64_t n,
                              int64_t block, const optim::AdamWStep& s, void* out, DType out_dtype,
                              cudaStream_t stream);

// ---- sgd.cu --------------------------------------------------------------------------------
// optim::sgd_update on a device shard, in its operation order:
//   g = grad * grad_scale + wd * p      (wd = with_decay ? cfg.weight_decay : 0)
//   buf = momentum * buf + g; g = buf   (only when cfg.momentum != 0; buf may be null otherwise)
//   p = p - lr * g;  out = p rounded to out_dtype (out may be null)
cudaError_t sgd(float* p, const void* grad, DType grad_dtype, float* momentum_buf, int64_t n,
                const optim::SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
                DType out_dtype, cudaStream_t stream);

// ---- grad_stats.cu -------------------------------------------------------------------------
// The device side of optim::span_stats: sum of squares in fp64 and a non-finite flag.
// Deterministic for a given n (fixed grid, partials summed in block order) but not in the CPU's
// order (8 lanes of element order), so it matches span_stats within fp64 rounding, not bitwise.
// scratch: kGradStatsBlocks doubles of device memory (block partials and a flag). With accumulate,
// *sum_squares += and *nonfinite |=; else they are overwritten. sum_squares [1] fp64, nonfinite [1]
// int (0 or 1).
constexpr int kGradStatsBlocks = 256;
cudaError_t grad_stats(const void* data, DType dtype, int64_t n, double* scratch,
                       double* sum_squares, int* nonfinite, bool accumulate, cudaStream_t stream);

// One span of a list for grad_stats_list (a plain struct: the list lives in device memory).
struct GradStatsSpan {
  const void* data = nullptr;  // device memory; may be null when n == 0
  int64_t n = 0;
  DType dtype = DType::kF32;  // fp32, bf16 or fp16: checked by the caller, the kernel cannot
  int32_t group = 0;          // index into nonfinite; in [0, num_groups): checked by the caller
};
// The host (g++) and the device (nvcc) must agree on the layout of the table.
static_assert(sizeof(GradStatsSpan) == 24 && alignof(GradStatsSpan) == 8,
              "GradStatsSpan layout changed");

// Sum of squares (fp64) of every element of every span, and per group whether any element of the
// group's spans is not finite, in one pass of one fixed grid (kGradStatsListBlocks blocks) over
// the spans' concatenation, then one block summing the block partials in block order: the result
// depends only on the span sizes and values, never on the device or on timing.
//   spans       device array of num_spans entries (validated by the caller)
//   partial     device scratch of kGradStatsListBlocks doubles
//   sum_squares device [1] fp64, overwritten
//   nonfinite   device [num_groups] uint32, overwritten: 1 when the group has a NaN or an inf
// Callers that want one device -> host copy put sum_squares and nonfinite side by side.
constexpr int kGradStatsListBlocks = 512;
cudaError_t grad_stats_list(const GradStatsSpan* spans, int num_spans, int num_groups,
                            double* partial, double* sum_squares, uint32_t* nonfinite,
                            cudaStream_t stream);

}  // namespace zs::gpu
