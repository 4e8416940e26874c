// Residual add, mirroring nn::residual_add (nn/elementwise.cc).
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 256;

__global__ void residual_add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = a[i] + b[i];
  }
}

// Four elements per thread when every pointer is 16-byte aligned.
__global__ void residual_add4_kernel(const float4* a, const float4* b, float4* out, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

cudaError_t residual_add(const float* a, const float* b, float* out, int64_t n,
                         cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(out)) {
    const int64_t n4 = n / 4;
    residual_add4_kernel<<<detail::grid_for(n4, kBlock), kBlock, 0, stream>>>(
        reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b),
        reinterpret_cast<float4*>(out), n4);
  } else {
    residual_add_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(a, b, out, n);
  }
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
