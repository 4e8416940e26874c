// Bias gradient (column sums of dy), mirroring nn::bias_backward (nn/elementwise.cc).
// Deterministic without atomics: rows are split into bias_backward_chunks(M) fixed chunks; a block
// of 32 x 8 threads sums one chunk for 32 columns (8 strided row partials, combined in order), and
// a second kernel adds the chunk partials of each column in chunk order. The bits depend only on
// (M, N), not on the device or the launch.
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {
namespace {

constexpr int kCols = 32;  // columns per block (one warp wide: coalesced row reads)
constexpr int kRows = 8;   // row partials per block

__global__ void bias_partial_kernel(const float* dy, int64_t M, int N, int64_t rows_per_chunk,
                                    float* partial) {
  __shared__ float s[kRows][kCols + 1];
  const int c = blockIdx.x * kCols + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
  float acc = 0.0f;
  if (c < N) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRows) acc += dy[r * N + c];
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < N) {
    float t = s[0][threadIdx.x];
    for (int y = 1; y < kRows; ++y) t += s[y][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * N + c] = t;
  }
}

__global__ void bias_final_kernel(const float* partial, int chunks, int N, float* db) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  float t = 0.0f;
  for (int k = 0; k < chunks; ++k) t += partial[static_cast<int64_t>(k) * N + c];
  db[c] += t;
}

}  // namespace

cudaError_t bias_backward(const float* dy, int64_t M, int N, float* db, float* scratch,
                          cudaStream_t stream) {
  if (M < 0 || N <= 0) return cudaErrorInvalidValue;
  if (M == 0) return cudaSuccess;
  const int chunks = bias_backward_chunks(M);
  const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((N + kCols - 1) / kCols), static_cast<unsigned>(chunks));
  bias_partial_kernel<<<grid, dim3(kCols, kRows), 0, stream>>>(dy, M, N, rows_per_chunk, scratch);
  bias_final_kernel<<<(N + 255) / 256, 256, 0, stream>>>(scratch, chunks, N, db);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
