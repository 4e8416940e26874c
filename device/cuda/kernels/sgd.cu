// SGD with momentum on a device shard, in optim::sgd_update's operation order (optim/sgd.cc).
// Every product and sum is an explicitly rounded intrinsic, so nvcc cannot contract them into
// FMAs and the result is the CPU's, bit for bit (the CPU builds with -ffp-contract=off).
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kBlock = 256;

__global__ void sgd_kernel(float* p, const void* grad, DType grad_dtype, float* buf, int64_t n,
                           bool use_momentum, float momentum, float wd, float lr, float grad_scale,
                           void* out, DType out_dtype) {
  for (int64_t i = detail::grid_thread(); i < n; i += detail::grid_stride()) {
    const float pi = p[i];
    // wd * p is computed even when wd == 0, as on the CPU (0 * inf is NaN there too).
    float g =
        __fadd_rn(__fmul_rn(detail::load(grad, grad_dtype, i), grad_scale), __fmul_rn(wd, pi));
    if (use_momentum) {
      g = __fadd_rn(__fmul_rn(momentum, buf[i]), g);
      buf[i] = g;
    }
    const float np = __fsub_rn(pi, __fmul_rn(lr, g));
    p[i] = np;
    if (out != nullptr) detail::store(out, out_dtype, i, np);
  }
}

}  // namespace

cudaError_t sgd(float* p, const void* grad, DType grad_dtype, float* momentum_buf, int64_t n,
                const optim::SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
                DType out_dtype, cudaStream_t stream) {
  // The CPU tests `momentum != 0`: a NaN momentum uses the buffer too.
  const bool use_momentum = cfg.momentum != 0.0f;
  if (n < 0 || !detail::is_compute_dtype(grad_dtype) ||
      (out != nullptr && !detail::is_compute_dtype(out_dtype)) ||
      (use_momentum && n > 0 && momentum_buf == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  const float wd = with_decay ? cfg.weight_decay : 0.0f;
  sgd_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(p, grad, grad_dtype, momentum_buf,
                                                                 n, use_momentum, cfg.momentum, wd,
                                                                 lr, grad_scale, out, out_dtype);
  return cudaGetLastError();
}

}  // namespace zs::gpu
