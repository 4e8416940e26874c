// Device helpers shared by every CUDA kernel (the runtime-side ones here and the layers of
// nn/cuda): element loads and stores by dtype with the rounding of core/convert.h
// (convert_bits.h), the dtype check, the grid-size rule and block reductions. C++17, included
// only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/convert_bits.h"
#include "core/dtype.h"

namespace zs::gpu::detail {

// Element i of a float buffer of dtype dt (fp32, bf16, fp16) as fp32; exact.
__device__ __forceinline__ float load(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::kBF16:
      return bits::bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16:
      return bits::fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Writes v rounded to dt (round to nearest even; NaNs as convert.h) into element i.
__device__ __forceinline__ void store(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::kBF16:
      static_cast<uint16_t*>(p)[i] = bits::fp32_to_bf16(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(p)[i] = bits::fp32_to_fp16(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
      break;
  }
}

inline bool is_compute_dtype(DType dt) {
  return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16;
}

inline size_t compute_dtype_size(DType dt) { return dt == DType::kF32 ? 4u : 2u; }

// Blocks for a grid-stride loop over n elements: enough to cover n, at most 65535 * 16.
inline unsigned grid_for(int64_t n, int block) {
  const int64_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g < 65535 * 16 ? (g < 1 ? 1 : g) : 65535 * 16);
}

// Index of this thread in a grid-stride loop, and the stride.
__device__ __forceinline__ int64_t grid_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `smem` holds 32 floats. Fixed order for a fixed blockDim: deterministic.
__device__ __forceinline__ float block_sum(float v, float* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // smem may still be read by a previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[lane] : 0.0f;
  return warp_sum(v);
}

// Maximum over the block, as block_sum.
__device__ __forceinline__ float block_max(float v, float* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace zs::gpu::detail
