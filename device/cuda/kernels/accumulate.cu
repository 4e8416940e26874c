// dst += src with one fp32 addition and one rounding to dst's dtype (gradient accumulation into a
// 16-bit or fp32 buffer, from the same dtype or from fp32).
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kBlock = 256;

__global__ void accumulate_kernel(void* dst, DType ddt, const void* src, DType sdt, int64_t n) {
  for (int64_t i = detail::grid_thread(); i < n; i += detail::grid_stride()) {
    detail::store(dst, ddt, i, __fadd_rn(detail::load(dst, ddt, i), detail::load(src, sdt, i)));
  }
}

}  // namespace

cudaError_t accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                       cudaStream_t stream) {
  if (n < 0 || !detail::is_compute_dtype(dst_dtype) ||
      (src_dtype != dst_dtype && src_dtype != DType::kF32)) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  accumulate_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(dst, dst_dtype, src,
                                                                        src_dtype, n);
  return cudaGetLastError();
}

}  // namespace zs::gpu
