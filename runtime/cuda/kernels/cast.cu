// Dtype casts between fp32, bf16 and fp16 (round to nearest even).
#include "nn/cuda/device_util.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {
namespace {

constexpr int kBlock = 256;

__global__ void cast_kernel(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    detail::store(dst, ddt, i, detail::load(src, sdt, i));
  }
}

}  // namespace

cudaError_t cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream) {
  if (n < 0 || !detail::is_compute_dtype(src_dtype) || !detail::is_compute_dtype(dst_dtype)) {
    return cudaErrorInvalidValue;
  }
  if (n == 0 || (src == dst && src_dtype == dst_dtype)) return cudaSuccess;
  if (src_dtype == dst_dtype) {
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * (src_dtype == DType::kF32 ? 4u : 2u),
                           cudaMemcpyDeviceToDevice, stream);
  }
  cast_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(src, src_dtype, dst, dst_dtype,
                                                                  n);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
