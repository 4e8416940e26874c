#include "nn/linear.h"

namespace zs::nn {

Linear::Linear(int64_t M, int in, int out, bool bias, bool residual, DType mm,
               MemoryTracker* tracker, GemmWorkspace* ws)
    : M_(M), in_(in), out_(out) {
  GemmDesc f;  // y[M, out] = x[M, in] * W^T, W stored [out][in] = [n][k]
  f.m = M;
  f.n = out;
  f.k = in;
  f.trans_b = true;
  f.dtype = mm;
  f.bias = bias;
  f.accumulate = residual;
  fwd_ = Gemm(f, tracker, ws);
  GemmDesc d;  // dx[M, in] = dy[M, out] * W[out, in]
  d.m = M;
  d.n = in;
  d.k = out;
  d.dtype = mm;
  bwd_data_ = Gemm(d, tracker, ws);
  GemmDesc w;  // dW[out, in] += dy^T x, dy stored [M][out] = [k][m]
  w.m = out;
  w.n = in;
  w.k = M;
  w.trans_a = true;
  w.dtype = mm;
  w.accumulate = true;
  bwd_weight_ = Gemm(w, tracker, ws);
}

void Linear::forward(const void* x, const void* w, const float* b, float* y) {
  fwd_.run(x, w, y, b);
}

void Linear::backward_data(const void* dy, const void* w, float* dx) { bwd_data_.run(dy, w, dx); }

void Linear::backward_weight(const void* dy, const void* x, float* dw) {
  bwd_weight_.run(dy, x, dw);
}

}  // namespace zs::nn
