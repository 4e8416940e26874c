#include "nn/linear.h"

#include <algorithm>

namespace zs::nn {

std::array<GemmDesc, 3> Linear::gemm_descs(int64_t M, int in, int out, bool bias, bool residual,
                                           DType mm) {
  GemmDesc f;  // y[M, out] = x[M, in] * W^T, W stored [out][in] = [n][k]
  f.m = M;
  f.n = out;
  f.k = in;
  f.trans_b = true;
  f.dtype = mm;
  f.bias = bias;
  f.accumulate = residual;
  GemmDesc d;  // dx[M, in] = dy[M, out] * W[out, in]
  d.m = M;
  d.n = in;
  d.k = out;
  d.dtype = mm;
  GemmDesc w;  // dW[out, in] += dy^T x, dy stored [M][out] = [k][m]
  w.m = out;
  w.n = in;
  w.k = M;
  w.trans_a = true;
  w.dtype = mm;
  w.accumulate = true;
  return {f, d, w};
}

Linear::Linear(int64_t M, int in, int out, bool bias, bool residual, DType mm,
               MemoryTracker* tracker, GemmWorkspace* ws)
    : M_(M), in_(in), out_(out) {
  const std::array<GemmDesc, 3> g = gemm_descs(M, in, out, bias, residual, mm);
  fwd_ = Gemm(g[0], tracker, ws);
  bwd_data_ = Gemm(g[1], tracker, ws);
  bwd_weight_ = Gemm(g[2], tracker, ws);
  if (bwd_data_.widens()) {
    if (ws == nullptr) ws = (own_ws_ = std::make_unique<GemmWorkspace>(tracker)).get();
    ws->reserve(backward_workspace_need(M, in, out));
    ws_ = ws;
  }
}

int64_t Linear::scratchpad_bytes() const {
  return static_cast<int64_t>(fwd_.scratchpad_bytes() + bwd_data_.scratchpad_bytes() +
                              bwd_weight_.scratchpad_bytes());
}

namespace {
size_t aligned_floats(int64_t n) { return static_cast<size_t>((4 * n + 63) / 64 * 64); }
}  // namespace

size_t Linear::backward_workspace_need(int64_t M, int in, int out) {
  return aligned_floats(M * out) +
         aligned_floats(std::max<int64_t>(static_cast<int64_t>(out) * in, M * in));
}

void Linear::backward(const void* dy, const void* x, const void* w, float* dx, float* dw) {
  if (ws_ == nullptr || dw == nullptr) {
    backward_data(dy, w, dx);
    if (dw != nullptr) backward_weight(dy, x, dw);
    return;
  }
  // [Note: GEMM paths] widened: dy once for both products, then w and x in turn after it.
  auto* base = static_cast<char*>(ws_->data());
  float* dy32 = reinterpret_cast<float*>(base);
  float* other = reinterpret_cast<float*>(base + aligned_floats(M_ * out_));
  widen_bf16(dy, dy32, M_ * out_);
  widen_bf16(w, other, static_cast<int64_t>(out_) * in_);
  bwd_data_.run_widened(dy32, other, dx);
  widen_bf16(x, other, M_ * in_);
  bwd_weight_.run_widened(dy32, other, dw);
}

void Linear::forward(const void* x, const void* w, const float* b, float* y) {
  fwd_.run(x, w, y, b);
}

void Linear::backward_data(const void* dy, const void* w, float* dx) { bwd_data_.run(dy, w, dx); }

void Linear::backward_weight(const void* dy, const void* x, float* dw) {
  bwd_weight_.run(dy, x, dw);
}

}  // namespace zs::nn
