// Layer norm forward and backward (eps 1e-5), mirroring nn/layernorm.cc.
#include "nn/cuda/device_util.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kBlock = 256;
using detail::block_sum;

// Row mean and rstd, two passes over the row (mean first, then the variance of x - mean), as
// the CPU does.
__device__ void row_moments(const float* x, int C, float* smem, float* mean, float* rstd) {
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
  const float mu = block_sum(s, smem) / static_cast<float>(C);
  float q = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = x[c] - mu;
    q += d * d;
  }
  const float var = block_sum(q, smem) / static_cast<float>(C);
  *mean = mu;
  *rstd = 1.0f / sqrtf(var + kEps);
}

// One block per row.
__global__ void layernorm_forward_kernel(const float* x, const float* w, const float* b, int C,
                                         void* out, DType dt, float* mean, float* rstd) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * C;
  float mu, rs;
  row_moments(xr, C, smem, &mu, &rs);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    detail::store(out, dt, row * C + c, (xr[c] - mu) * rs * w[c] + b[c]);
  }
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w; one block/row.
__global__ void layernorm_dx_kernel(const float* x, const float* w, const float* mean,
                                    const float* rstd, const float* dy, int C, float* dx) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * C;
  const float* dr = dy + row * C;
  const float mu = mean[row], rs = rstd[row];
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float dxhat = dr[c] * w[c];
    s1 += dxhat;
    s2 += dxhat * ((xr[c] - mu) * rs);
  }
  const float m1 = block_sum(s1, smem) / static_cast<float>(C);
  const float m2 = block_sum(s2, smem) / static_cast<float>(C);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (xr[c] - mu) * rs;
    dx[row * C + c] += rs * (dr[c] * w[c] - m1 - xhat * m2);
  }
}

// dw, db: one thread per column, rows summed in order (coalesced across the warp).
__global__ void layernorm_dwdb_kernel(const float* x, const float* mean, const float* rstd,
                                      const float* dy, int64_t M, int C, float* dw, float* db) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float aw = 0.0f, ab = 0.0f;
  for (int64_t i = 0; i < M; ++i) {
    const float d = dy[i * C + c];
    aw += d * ((x[i * C + c] - mean[i]) * rstd[i]);
    ab += d;
  }
  dw[c] += aw;
  db[c] += ab;
}

}  // namespace

cudaError_t layernorm_forward(const float* x, const float* w, const float* b, int64_t M, int C,
                              void* out, DType dt, float* mean, float* rstd, cudaStream_t stream) {
  if (C <= 0 || C > kMaxRow || M < 0 || !detail::is_compute_dtype(dt)) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  layernorm_forward_kernel<<<static_cast<unsigned>(M), kBlock, 0, stream>>>(x, w, b, C, out, dt,
                                                                            mean, rstd);
  return cudaGetLastError();
}

cudaError_t layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                               const float* dy, int64_t M, int C, float* dx, float* dw, float* db,
                               cudaStream_t stream) {
  if (C <= 0 || C > kMaxRow || M < 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  layernorm_dx_kernel<<<static_cast<unsigned>(M), kBlock, 0, stream>>>(x, w, mean, rstd, dy, C, dx);
  layernorm_dwdb_kernel<<<(C + kBlock - 1) / kBlock, kBlock, 0, stream>>>(x, mean, rstd, dy, M, C,
                                                                          dw, db);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
