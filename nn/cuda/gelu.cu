// GELU (tanh approximation) forward and backward, mirroring nn/elementwise.cc.
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 256;
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

__device__ __forceinline__ float gelu(float v) {
  const float u = kGeluK * (v + kGeluA * v * v * v);
  return 0.5f * v * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad(float v) {
  const float u = kGeluK * (v + kGeluA * v * v * v);
  const float t = tanhf(u);
  const float du = kGeluK * (1.0f + 3.0f * kGeluA * v * v);
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

__global__ void gelu_forward_kernel(const float* x, void* out, DType dt, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    detail::store(out, dt, i, gelu(x[i]));
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dx[i] = dy[i] * gelu_grad(x[i]);
  }
}

}  // namespace

cudaError_t gelu_forward(const float* x, void* out, DType dt, int64_t n, cudaStream_t stream) {
  if (n < 0 || !detail::is_compute_dtype(dt)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  gelu_forward_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(x, out, dt, n);
  return cudaGetLastError();
}

cudaError_t gelu_backward(const float* x, const float* dy, float* dx, int64_t n,
                          cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  gelu_backward_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(x, dy, dx, n);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
