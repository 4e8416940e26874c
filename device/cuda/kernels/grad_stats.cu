// Gradient sum of squares (fp64) and non-finite check: the device side of optim::span_stats, for
// the global norm and the overflow flag, on one span (grad_stats) or on a list of spans with one
// flag per group (grad_stats_list). Deterministic: a fixed grid, a fixed reduction tree per block,
// and the block partials summed in block order by one final block. Squares of fp32 values are
// exact in fp64, so whether nvcc fuses `acc + x * x` into an FMA does not change any bit.
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kBlock = 256;  // a power of two (block_sum_f64) and a multiple of the warp size

// Sum over the block in a fixed tree; every thread gets the result. smem holds kBlock doubles.
__device__ double block_sum_f64(double v, double* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  return smem[0];
}

// ---- one span ------------------------------------------------------------------------------

__global__ void grad_stats_partial_kernel(const void* data, DType dt, int64_t n, double* partial,
                                          int* nonfinite) {
  __shared__ double smem[kBlock];
  double acc = 0.0;
  bool bad = false;
  for (int64_t i = detail::grid_thread(); i < n; i += detail::grid_stride()) {
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

// ---- a list of spans -----------------------------------------------------------------------

// Thread t of the grid takes the elements of the spans' concatenation whose index is t modulo
// the grid size, span after span, so small spans spread over the grid instead of all landing on
// its first blocks. Each thread's sum runs in a fixed order; the flags are ORed (order-free).
__global__ void grad_stats_list_partial_kernel(const GradStatsSpan* spans, int num_spans,
                                               double* partial, uint32_t* nonfinite) {
  __shared__ double smem[kBlock];
  const int64_t first = detail::grid_thread();
  const int64_t stride = detail::grid_stride();
  double acc = 0.0;
  int64_t offset = 0;  // where the span starts in the concatenation
  for (int s = 0; s < num_spans; ++s) {
    const GradStatsSpan sp = spans[s];
    int64_t i = first - offset % stride;  // the first i with (offset + i) % stride == first
    if (i < 0) i += stride;
    bool bad = false;
    for (; i < sp.n; i += stride) {
      const float x = detail::load(sp.data, sp.dtype, i);
      bad |= !isfinite(x);
      acc += static_cast<double>(x) * static_cast<double>(x);
    }
    // Every thread of every (full) warp reaches this once per span: one atomic per warp at most.
    if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31u) == 0) {
      atomicOr(&nonfinite[sp.group], 1u);
    }
    offset += sp.n;
  }
  const double total = block_sum_f64(acc, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void grad_stats_list_final_kernel(const double* partial, int blocks,
                                             double* sum_squares) {
  __shared__ double smem[kBlock];
  double acc = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) acc += partial[b];
  const double total = block_sum_f64(acc, smem);
  if (threadIdx.x == 0) *sum_squares = total;
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

cudaError_t grad_stats_list(const GradStatsSpan* spans, int num_spans, int num_groups,
                            double* partial, double* sum_squares, uint32_t* nonfinite,
                            cudaStream_t stream) {
  if (num_spans < 0 || num_groups < 0 || (num_spans > 0 && spans == nullptr) ||
      partial == nullptr || sum_squares == nullptr || (num_groups > 0 && nonfinite == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (num_groups > 0) {
    const cudaError_t err =
        cudaMemsetAsync(nonfinite, 0, sizeof(uint32_t) * static_cast<size_t>(num_groups), stream);
    if (err != cudaSuccess) return err;
  }
  grad_stats_list_partial_kernel<<<kGradStatsListBlocks, kBlock, 0, stream>>>(spans, num_spans,
                                                                              partial, nonfinite);
  grad_stats_list_final_kernel<<<1, kBlock, 0, stream>>>(partial, kGradStatsListBlocks,
                                                         sum_squares);
  return cudaGetLastError();
}

}  // namespace zs::gpu
