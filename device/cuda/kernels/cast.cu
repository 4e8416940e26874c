// Dtype casts between fp32, bf16 and fp16 (round to nearest even, NaNs as convert.h).
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kBlock = 256;

__global__ void cast_kernel(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  for (int64_t i = detail::grid_thread(); i < n; i += detail::grid_stride()) {
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
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * detail::compute_dtype_size(src_dtype),
                           cudaMemcpyDeviceToDevice, stream);
  }
  cast_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(src, src_dtype, dst, dst_dtype,
                                                                  n);
  return cudaGetLastError();
}

}  // namespace zs::gpu
