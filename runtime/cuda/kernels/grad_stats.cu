// Gradient sum of squares (fp64) and non-finite check on a device span: the device side of
// optim::span_stats, for the global norm and the overflow flag. Deterministic for a given n: a
// fixed grid of kGradStatsBlocks blocks, a fixed reduction tree per block, and the block partials
// summed in block order by one final block.
#include "nn/cuda/device_util.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {
namespace {

constexpr int kBlock = 256;

__device__ double block_sum_f64(double v, double* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  return smem[0];
}

__global__ void grad_stats_partial_kernel(const void* data, DType dt, int64_t n, double* partial,
                                          int* nonfinite) {
  __shared__ double smem[kBlock];
  double acc = 0.0;
  bool bad = false;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = detail::load(data, dt, i);
    bad |= !isfinite(x);
    acc += static_cast<double>(x) * static_cast<double>(x);
  }
  // OR is order-independent: the flag is deterministic.
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(nonfinite, 1);
  const double total = block_sum_f64(acc, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void grad_stats_final_kernel(const double* partial, int blocks, double* sum_squares,
                                        int* nonfinite, int* flag, bool accumulate) {
  __shared__ double smem[kBlock];
  double acc = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) acc += partial[b];
  const double total = block_sum_f64(acc, smem);
  if (threadIdx.x == 0) {
    *sum_squares = accumulate ? *sum_squares + total : total;
    *nonfinite = (accumulate ? *nonfinite : 0) | *flag;
  }
}

}  // namespace

cudaError_t grad_stats(const void* data, DType dtype, int64_t n, double* scratch,
                       double* sum_squares, int* nonfinite, bool accumulate, cudaStream_t stream) {
  if (n < 0 || !detail::is_compute_dtype(dtype) || scratch == nullptr) {
    return cudaErrorInvalidValue;
  }
  // The scratch ends with room for the partial flag: partials [kGradStatsBlocks - 1] doubles,
  // then one double's worth holding the int flag.
  const int blocks = kGradStatsBlocks - 1;
  int* flag = reinterpret_cast<int*>(scratch + blocks);
  cudaError_t err = cudaMemsetAsync(flag, 0, sizeof(int), stream);
  if (err != cudaSuccess) return err;
  if (n > 0) {
    grad_stats_partial_kernel<<<blocks, kBlock, 0, stream>>>(data, dtype, n, scratch, flag);
  } else {
    err = cudaMemsetAsync(scratch, 0, sizeof(double) * blocks, stream);
    if (err != cudaSuccess) return err;
  }
  grad_stats_final_kernel<<<1, kBlock, 0, stream>>>(scratch, blocks, sum_squares, nonfinite, flag,
                                                    accumulate);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
