// Fused AdamW on a device shard, in [Note: AdamW operation order] (optim/adamw.h). Every product,
// sum, quotient and square root is an explicitly rounded intrinsic, so nvcc cannot contract them
// into FMAs and the result is the CPU reference's, bit for bit.
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kBlock = 256;

__global__ void adamw_kernel(float* p, const void* grad, DType grad_dtype, float* m, float* v,
                             int64_t n, optim::AdamWStep s, void* out, DType out_dtype) {
  for (int64_t i = detail::grid_thread(); i < n; i += detail::grid_stride()) {
    const float g = __fmul_rn(detail::load(grad, grad_dtype, i), s.grad_scale);
    float pi = __fmul_rn(p[i], s.decay);
    const float mi = __fadd_rn(__fmul_rn(m[i], s.beta1), __fmul_rn(g, s.one_minus_beta1));
    const float vi =
        __fadd_rn(__fmul_rn(v[i], s.beta2), __fmul_rn(__fmul_rn(g, g), s.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias2_sqrt), s.eps);
    pi = __fsub_rn(pi, __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (out != nullptr) detail::store(out, out_dtype, i, pi);
  }
}

}  // namespace

cudaError_t adamw(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
                  const optim::AdamWStep& s, void* out, DType out_dtype, cudaStream_t stream) {
  if (n < 0 || !detail::is_compute_dtype(grad_dtype) ||
      (out != nullptr && !detail::is_compute_dtype(out_dtype))) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  adamw_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(p, grad, grad_dtype, m, v, n, s,
                                                                   out, out_dtype);
  return cudaGetLastError();
}

}  // namespace zs::gpu
