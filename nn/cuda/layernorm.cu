// Layer norm forward and backward (eps 1e-5), mirroring nn/layernorm.cc.
#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
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

// dw, db: deterministic column sums without atomics, in the bias gradient's scheme (bias_grad.cu):
// rows split into bias_backward_chunks(M) fixed chunks; a block of 32 x 8 threads sums one chunk
// for 32 columns (8 strided row partials combined in order) into partial[k][C] (dw) and
// partial[chunks + k][C] (db); layernorm_dwdb_final_kernel adds the chunks in order. The bits
// depend only on (M, C). The previous version ran one thread per column over all M rows: C
// threads in all (768 for GPT-2 small), each a chain of M dependent loads.
constexpr int kCols = 32;
constexpr int kRows = 8;

__global__ void layernorm_dwdb_partial_kernel(const float* x, const float* mean, const float* rstd,
                                              const float* dy, int64_t M, int C,
                                              int64_t rows_per_chunk, float* partial) {
  __shared__ float sw[kRows][kCols + 1];
  __shared__ float sb[kRows][kCols + 1];
  const int c = blockIdx.x * kCols + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
  float aw = 0.0f, ab = 0.0f;
  if (c < C) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRows) {
      const float d = dy[r * C + c];
      aw += d * ((x[r * C + c] - mean[r]) * rstd[r]);
      ab += d;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tw = sw[0][threadIdx.x], tb = sb[0][threadIdx.x];
    for (int y = 1; y < kRows; ++y) {
      tw += sw[y][threadIdx.x];
      tb += sb[y][threadIdx.x];
    }
    partial[static_cast<int64_t>(blockIdx.y) * C + c] = tw;
    partial[static_cast<int64_t>(gridDim.y + blockIdx.y) * C + c] = tb;
  }
}

__global__ void layernorm_dwdb_final_kernel(const float* partial, int chunks, int C, float* dw,
                                            float* db) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float tw = 0.0f, tb = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    tw += partial[static_cast<int64_t>(k) * C + c];
    tb += partial[static_cast<int64_t>(chunks + k) * C + c];
  }
  dw[c] += tw;
  db[c] += tb;
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
                               float* scratch, cudaStream_t stream) {
  if (C <= 0 || C > kMaxRow || M < 0 || scratch == nullptr) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  layernorm_dx_kernel<<<static_cast<unsigned>(M), kBlock, 0, stream>>>(x, w, mean, rstd, dy, C, dx);
  const int chunks = bias_backward_chunks(M);
  const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((C + kCols - 1) / kCols), static_cast<unsigned>(chunks));
  layernorm_dwdb_partial_kernel<<<grid, dim3(kCols, kRows), 0, stream>>>(x, mean, rstd, dy, M, C,
                                                                         rows_per_chunk, scratch);
  layernorm_dwdb_final_kernel<<<(C + kBlock - 1) / kBlock, kBlock, 0, stream>>>(scratch, chunks, C,
                                                                                dw, db);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
