// The device scratch the CUDA kernels and cuBLASLt need, as plain host C++ (C++17, no CUDA
// headers): nn/cuda/kernels.h declares the kernels that use it and includes this header (so do
// the .cu files, through it), and models/gpt/cuda/gpt_cuda_workspace.cc sizes CudaGptModel's
// scratch from it in every build, with CUDA or without (zs_plan --device cuda plans for a GPU
// anywhere).
#pragma once

#include <cstdint>

namespace zs::nn::gpu {

// bias_backward and layernorm_backward (nn/cuda/kernels.h) sum columns without atomics: the M rows
// are split into fixed chunks (at least 256 rows per chunk, at most 64 chunks) whose partial sums
// are added in chunk order, so the bits depend only on the shape.
inline int bias_backward_chunks(int64_t M) {
  const int64_t c = (M + 255) / 256;
  return c < 1 ? 1 : (c > 64 ? 64 : static_cast<int>(c));
}
// Scratch floats of bias_backward over [M, N]: one partial row per chunk.
inline int64_t bias_backward_scratch_floats(int64_t M, int64_t N) {
  return static_cast<int64_t>(bias_backward_chunks(M)) * N;
}
// Scratch floats of layernorm_backward over [M, C]: a dw and a db partial per chunk.
inline int64_t layernorm_backward_scratch_floats(int64_t M, int64_t C) {
  return 2 * bias_backward_scratch_floats(M, C);
}

// The cuBLASLt workspace CudaGptModel gives its CublasContext (nn/cuda/gemm.h), registered under
// kActivations.
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

}  // namespace zs::nn::gpu
