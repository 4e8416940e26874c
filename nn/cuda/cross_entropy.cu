// Softmax cross-entropy over the vocabulary, forward and backward, mirroring nn/softmax.cc.
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 512;
using detail::block_max;
using detail::block_sum;

// One block per row: probs = softmax(logits), row_loss = logsumexp - logits[target].
__global__ void cross_entropy_forward_kernel(const float* logits, const int32_t* targets, int V,
                                             float* probs, float* row_loss) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* lr = logits + row * V;
  float* pr = probs + row * V;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, lr[j]);
  mx = block_max(mx, smem);
  const float lt = lr[targets[row]];
  __syncthreads();  // every thread has read lt before probs (which may alias logits) is written
  // One exp per logit: the exponentials go to probs (each thread rewrites only its own columns,
  // which it has just read) and are scaled in place once the sum is known.
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(lr[j] - mx);
    pr[j] = e;
    sum += e;
  }
  sum = block_sum(sum, smem);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < V; j += blockDim.x) pr[j] *= inv;
  if (threadIdx.x == 0) row_loss[row] = logf(sum) + mx - lt;
}

__global__ void cross_entropy_backward_kernel(const float* probs, const int32_t* targets, int64_t M,
                                              int V, float k, float* dlogits) {
  const int64_t total = M * V;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / V;
    const int j = static_cast<int>(i - row * V);
    const float p = probs[i];
    dlogits[i] = j == targets[row] ? (p - 1.0f) * k : p * k;
  }
}

}  // namespace

cudaError_t cross_entropy_forward(const float* logits, const int32_t* targets, int64_t M, int V,
                                  float* probs, float* row_loss, cudaStream_t stream) {
  if (V <= 0 || M < 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  cross_entropy_forward_kernel<<<static_cast<unsigned>(M), kBlock, 0, stream>>>(logits, targets, V,
                                                                                probs, row_loss);
  return cudaGetLastError();
}

cudaError_t cross_entropy_backward(const float* probs, const int32_t* targets, int64_t M, int V,
                                   float scale, float* dlogits, cudaStream_t stream) {
  if (V <= 0 || M < 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  const float k = scale / static_cast<float>(M);
  cross_entropy_backward_kernel<<<detail::grid_for(M * V, 256), 256, 0, stream>>>(probs, targets, M,
                                                                                  V, k, dlogits);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
