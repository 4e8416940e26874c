// Token + position embedding forward and backward, mirroring nn/elementwise.cc. The backward is
// deterministic without atomics: the host groups the positions of each token id once per
// micro-batch (embedding_grad_index), and one thread per (token id, column) sums its rows in index
// order, so dwte gets the CPU's bits (same additions in the same order).
#include <cstring>

#include "device/cuda/kernels/device_access.cuh"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace detail = zs::gpu::detail;  // device_access.cuh
namespace {

constexpr int kBlock = 256;

// One thread per output element: out[i, c] = wte[tokens[i], c] + wpe[i mod T, c].
__global__ void embedding_forward_kernel(const int32_t* tokens, int T, int C, const void* wte,
                                         const void* wpe, DType dt, int64_t n, float* out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / C;
    const int c = static_cast<int>(e - i * C);
    const int64_t tok = tokens[i];
    const int64_t t = i % T;
    out[e] = detail::load(wte, dt, tok * C + c) + detail::load(wpe, dt, t * C + c);
  }
}

// Block (r, column tile): dwte[rows[r], c] += dout[order[j], c] for j in [offsets[r],
// offsets[r+1]) in order, accumulated in a register starting from the current value.
__global__ void embedding_backward_wte_kernel(const int32_t* order, const int32_t* rows,
                                              const int32_t* offsets, int C, const float* dout,
                                              float* dwte) {
  const int r = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float* g = dwte + static_cast<int64_t>(rows[r]) * C + c;
  float acc = *g;
  const int end = offsets[r + 1];
  for (int j = offsets[r]; j < end; ++j) acc += dout[static_cast<int64_t>(order[j]) * C + c];
  *g = acc;
}

// One thread per (t, c): dwpe[t, c] += dout[b*T + t, c] for b = 0 .. B-1 in order.
__global__ void embedding_backward_wpe_kernel(int B, int T, int C, const float* dout, float* dwpe) {
  const int64_t n = static_cast<int64_t>(T) * C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = dwpe[e];
    for (int b = 0; b < B; ++b) acc += dout[static_cast<int64_t>(b) * n + e];
    dwpe[e] = acc;
  }
}

}  // namespace

int embedding_grad_index(const int32_t* tokens, int64_t M, int V, int32_t* counts, int32_t* order,
                         int32_t* rows, int32_t* offsets) {
  if (M < 0 || V <= 0) return -1;
  std::memset(counts, 0, sizeof(int32_t) * (static_cast<size_t>(V) + 1));
  for (int64_t i = 0; i < M; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V) return -1;
    ++counts[tokens[i] + 1];
  }
  for (int v = 0; v < V; ++v) counts[v + 1] += counts[v];  // counts[v] = first slot of id v
  int n = 0;
  for (int v = 0; v < V; ++v) {
    if (counts[v + 1] > counts[v]) {
      rows[n] = v;
      offsets[n] = counts[v];
      ++n;
    }
  }
  offsets[n] = static_cast<int32_t>(M);
  for (int64_t i = 0; i < M; ++i) order[counts[tokens[i]]++] = static_cast<int32_t>(i);  // stable
  return n;
}

cudaError_t embedding_forward(const int32_t* tokens, int B, int T, int C, const void* wte,
                              const void* wpe, DType dt, float* out, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || !detail::is_compute_dtype(dt)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * T * C;
  embedding_forward_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(tokens, T, C, wte,
                                                                               wpe, dt, n, out);
  return cudaGetLastError();
}

cudaError_t embedding_backward(const int32_t* order, const int32_t* rows, const int32_t* offsets,
                               int num_rows, int B, int T, int C, const float* dout, float* dwte,
                               float* dwpe, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || num_rows < 0) return cudaErrorInvalidValue;
  if (num_rows > 0) {
    const int block = C >= kBlock ? kBlock : (C + 31) / 32 * 32;
    const dim3 grid(static_cast<unsigned>(num_rows),
                    static_cast<unsigned>((C + block - 1) / block));
    embedding_backward_wte_kernel<<<grid, block, 0, stream>>>(order, rows, offsets, C, dout, dwte);
  }
  const int64_t n = static_cast<int64_t>(T) * C;
  embedding_backward_wpe_kernel<<<detail::grid_for(n, kBlock), kBlock, 0, stream>>>(B, T, C, dout,
                                                                                    dwpe);
  return cudaGetLastError();
}

}  // namespace zs::nn::gpu
