// Causal (masked) softmax of the attention scores, forward and backward, mirroring the CPU's
// causal_softmax_* in nn/softmax.cc. One block per row of T scores.
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 256;
using detail::block_max;
using detail::block_sum;

// Row r (of BH*T) keeps columns j <= r mod T.
__global__ void causal_softmax_forward_kernel(const float* s, float* p, void* pm, DType mm, int T) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(row % T) + 1;
  const float* sr = s + row * T;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  mx = block_max(mx, smem);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += expf(sr[j] - mx);
  const float inv = 1.0f / block_sum(sum, smem);
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    const float v = j < n ? expf(sr[j] - mx) * inv : 0.0f;
    p[row * T + j] = v;
    if (pm != nullptr) detail::store(pm, mm, row * T + j, v);
  }
}

__global__ void causal_softmax_backward_kernel(const float* p, const float* dp, float* ds,
                                               void* dsm, DType mm, int T) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const int n = static_cast<int>(row % T) + 1;
  const float* pr = p + row * T;
  const float* dr = dp + row * T;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) dot += pr[j] * dr[j];
  dot = block_sum(dot, smem);  // every thread has read its dp before any ds is written below
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    const float v = j < n ? pr[j] * (dr[j] - dot) : 0.0f;
    ds[row * T + j] = v;
    if (dsm != nullptr) detail::store(dsm, mm, row * T + j, v);
  }
}

}  // namespace

cudaError_t causal_softmax_forward(const float* s, float* p, void* pm, DType mm_dtype, int64_t BH,
                                   int T, cudaStream_t stream) {
  if (T <= 0 || BH < 0 || !detail::is_compute_dtype(mm_dtype)) return cudaErrorInvalidValue;
  if (BH == 0) return cudaSuccess;
  causal_softmax_forward_kernel<<<static_cast<unsigned>(BH * T), kBlock, 0, stream>>>(s, p, pm,
                                                                                      mm_dtype, T);
  return cudaGetLastError();
}

cudaError_t causal_softmax_backward(const float* p, const float* dp, float* ds, void* dsm,
                                    DType mm_dtype, int64_t BH, int T, cudaStream_t stream) {
  if (T <= 0 || BH < 0 || !detail::is_compute_dtype(mm_dtype)) return cudaErrorInvalidValue;
  if (BH == 0) return cudaSuccess;
  causal_softmax_backward_kernel<<<static_cast<unsigned>(BH * T), kBlock, 0, stream>>>(
      p, dp, ds, dsm, mm_dtype, T);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
