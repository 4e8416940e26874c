#include "nn/cuda/linear.h"

namespace zs::nn::gpu {

CudaLinear::CudaLinear(CublasContext& ctx, int64_t M, int in, int out, bool bias, DType mm) {
  CudaGemmDesc f;  // y[M, out] = x[M, in] * W^T, W stored [out][in] = [n][k]
  f.m = M;
  f.n = out;
  f.k = in;
  f.trans_b = true;
  f.dtype = mm;
  f.bias = bias;
  fwd_ = CudaGemm(ctx, f);
  CudaGemmDesc d;  // dx[M, in] = dy[M, out] * W[out, in]
  d.m = M;
  d.n = in;
  d.k = out;
  d.dtype = mm;
  bwd_data_ = CudaGemm(ctx, d);
  CudaGemmDesc w;  // dW[out, in] += dy^T x, dy stored [M][out] = [k][m]
  w.m = out;
  w.n = in;
  w.k = M;
  w.trans_a = true;
  w.dtype = mm;
  w.accumulate = true;
  bwd_weight_ = CudaGemm(ctx, w);
}

void CudaLinear::forward(const void* x, const void* w, const float* b, float* y,
                         cudaStream_t stream) {
  fwd_.run(x, w, y, stream, b);
}

void CudaLinear::backward_data(const void* dy, const void* w, float* dx, cudaStream_t stream) {
  bwd_data_.run(dy, w, dx, stream);
}

void CudaLinear::backward_weight(const void* dy, const void* x, float* dw, cudaStream_t stream) {
  bwd_weight_.run(dy, x, dw, stream);
}

}  // namespace zs::nn::gpu
