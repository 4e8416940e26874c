// Fully connected layer on the GPU, the device twin of nn/linear.h: y[M, out] = x[M, in] W^T + b
// with W [out, in] row-major. Stateless apart from its three CudaGemms (descriptors and
// heuristics computed once), so one CudaLinear serves every block of the same shape.
//
// Operands in the matmul dtype `mm` (fp32, bf16 or fp16), fp32 accumulation; outputs, bias and
// gradients fp32. Every call only enqueues on `stream`. Thread-safety: as CudaGemm.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "nn/cuda/gemm.h"

namespace zs::nn::gpu {

class CudaLinear {
 public:
  CudaLinear() = default;
  CudaLinear(CublasContext& ctx, int64_t M, int in, int out, bool bias, DType mm);

  // y = x W^T + b (overwrites). x [M, in], w [out, in] in mm; b [out] fp32 (null without bias).
  void forward(const void* x, const void* w, const float* b, float* y, cudaStream_t stream);
  // dx[M, in] = dy W (overwrites). dy [M, out] in mm.
  void backward_data(const void* dy, const void* w, float* dx, cudaStream_t stream);
  // dw[out, in] += dy^T x (accumulates). dy [M, out] and x [M, in] in mm.
  void backward_weight(const void* dy, const void* x, float* dw, cudaStream_t stream);

 private:
  CudaGemm fwd_, bwd_data_, bwd_weight_;
};

}  // namespace zs::nn::gpu
