// Head split/merge permutations around the attention GEMMs (nn/cuda/attention.cc).
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 256;

// Index i over [B, H, T, hd] -> (token row b*T + t, column h*hd + d) of a [B*T, C] matrix.
struct HeadIndex {
  int64_t row;
  int64_t col;
};

__device__ __forceinline__ HeadIndex head_index(int64_t i, int T, int H, int hd) {
  const int d = static_cast<int>(i % hd);
  int64_t r = i / hd;
  const int t = static_cast<int>(r % T);
  r /= T;
  const int h = static_cast<int>(r % H);
  const int64_t b = r / H;
  return {b * T + t, static_cast<int64_t>(h) * hd + d};
}

__global__ void split_heads_kernel(const float* qkv, void* q, void* k, void* v, DType mm, int64_t n,
                                   int T, int C, int H) {
  const int hd = C / H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const HeadIndex x = head_index(i, T, H, hd);
    const float* row = qkv + x.row * 3 * C;
    detail::store(q, mm, i, row[x.col]);
    detail::store(k, mm, i, row[C + x.col]);
    detail::store(v, mm, i, row[2 * C + x.col]);
  }
}

__global__ void merge_heads_kernel(const float* o, void* out, DType dt, int64_t n, int T, int C,
                                   int H) {
  const int hd = C / H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const HeadIndex x = head_index(i, T, H, hd);
    detail::store(out, dt, x.row * C + x.col, o[i]);
  }
}

__global__ void split_grad_kernel(const float* dout, void* dom, DType mm, int64_t n, int T, int C,
                                  int H) {
  const int hd = C / H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const HeadIndex x = head_index(i, T, H, hd);
    detail::store(dom, mm, i, dout[x.row * C + x.col]);
  }
}

__global__ void merge_grads_kernel(const float* dq, const float* dk, const float* dv, float* dqkv,
                                   int64_t n, int T, int C, int H) {
  const int hd = C / H;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const HeadIndex x = head_index(i, T, H, hd);
    float* row = dqkv + x.row * 3 * C;
    row[x.col] = dq[i];
    row[C + x.col] = dk[i];
    row[2 * C + x.col] = dv[i];
  }
}

bool bad_shape(int B, int T, int C, int H) {
  return B <= 0 || T <= 0 || C <= 0 || H <= 0 || C % H != 0;
}

}  // namespace

cudaError_t attention_split_heads(const float* qkv, void* q, void* k, void* v, DType mm, int B,
                                  int T, int C, int H, cudaStream_t stream) {
  if (bad_shape(B, T, C, H) || !detail::is_compute_dtype(mm)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * T * C;
  split_heads_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(qkv, q, k, v, mm, n, T, C,
                                                                         H);
  return cudaGetLastError();
}

cudaError_t attention_merge_heads(const float* o, void* out, DType dt, int B, int T, int C, int H,
                                  cudaStream_t stream) {
  if (bad_shape(B, T, C, H) || !detail::is_compute_dtype(dt)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * T * C;
  merge_heads_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(o, out, dt, n, T, C, H);
  return cudaGetLastError();
}

cudaError_t attention_split_grad(const float* dout, void* dom, DType mm, int B, int T, int C, int H,
                                 cudaStream_t stream) {
  if (bad_shape(B, T, C, H) || !detail::is_compute_dtype(mm)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * T * C;
  split_grad_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(dout, dom, mm, n, T, C, H);
  return cudaGetLastError();
}

cudaError_t attention_merge_grads(const float* dq, const float* dk, const float* dv, float* dqkv,
                                  int B, int T, int C, int H, cudaStream_t stream) {
  if (bad_shape(B, T, C, H)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * T * C;
  merge_grads_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(dq, dk, dv, dqkv, n, T, C,
                                                                         H);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
