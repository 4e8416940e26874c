// Plain scalar loops of the row kernels (kernel_reference.h); built with -fno-tree-vectorize
// -fno-tree-slp-vectorize. The reductions follow [Note: row reductions] in nn/simd.h: 16 partial
// results over the whole 16-element blocks, combined in lane order, then the tail.
#include "tests/nn/kernel_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/simd.h"

namespace zs::nn::kernel_ref {

namespace {
// The reduction order of nn/simd.h's row_sum, row_max and row_dot, one scalar per lane:
// acc[j] = op(acc[j], elem(i)) over the whole blocks, then r = op(r, acc[j]) for j = 0..15, then
// r = op(r, elem(i)) over the tail.
template <class Elem, class Op>
float reduce16(int n, float init, Elem elem, Op op) {
  float acc[16];
  for (float& a : acc) a = init;
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] = op(acc[j], elem(i + j));
  float r = init;
  for (int j = 0; j < 16; ++j) r = op(r, acc[j]);
  for (; i < n; ++i) r = op(r, elem(i));
  return r;
}
const auto kAdd = [](float a, float b) { return a + b; };
float row_sum(const float* x, int n) {
  return reduce16(
      n, 0.0f, [x](int i) { return x[i]; }, kAdd);
}
float row_max(const float* x, int n) {
  return reduce16(
      n, -INFINITY, [x](int i) { return x[i]; }, [](float a, float b) { return std::max(a, b); });
}
float row_dot(const float* x, const float* y, int n) {
  return reduce16(
      n, 0.0f, [x, y](int i) { return x[i] * y[i]; }, kAdd);
}

float sigmoid(float g) { return 1.0f / (1.0f + simd::exp_approx(-g)); }

// The kernels' softmax of x[0..n) into p: exp of x - max, then times 1 / sum. Returns the sum.
float softmax(const float* x, float* p, int n, float* max_out) {
  const float mx = row_max(x, n);
  for (int j = 0; j < n; ++j) p[j] = simd::exp_approx(x[j] - mx);
  const float sum = row_sum(p, n);
  const float inv = 1.0f / sum;
  for (int j = 0; j < n; ++j) p[j] *= inv;
  *max_out = mx;
  return sum;
}
}  // namespace

void swiglu_forward(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], s = sigmoid(g);
    dgate[i] = dy[i] * up[i] * (s * (1.0f + g * (1.0f - s)));
    dup[i] = dy[i] * (g * s);
  }
}

void softmax_row(const float* s, int n, int T, float* p) {
  float mx = 0.0f;
  softmax(s, p, n, &mx);
  for (int j = n; j < T; ++j) p[j] = 0.0f;
}

void softmax_grad_row(const float* p, const float* dp, int n, int T, float* ds) {
  const float dot = row_dot(p, dp, n);
  for (int j = 0; j < T; ++j) ds[j] = j < n ? p[j] * (dp[j] - dot) : 0.0f;
}

float cross_entropy_row(const float* logits, int V, int target, float* probs) {
  float mx = 0.0f;
  const float sum = softmax(logits, probs, V, &mx);
  return std::log(sum) + mx - logits[target];
}

void cross_entropy_grad_row(const float* probs, int V, int target, float k, float* d) {
  for (int j = 0; j < V; ++j) d[j] = probs[j] * k;
  d[target] = (probs[target] - 1.0f) * k;
}

float rmsnorm_row(const float* x, const float* w, int C, float eps, float* y) {
  const float rstd = 1.0f / std::sqrt(row_dot(x, x, C) / static_cast<float>(C) + eps);
  for (int c = 0; c < C; ++c) y[c] = x[c] * rstd * w[c];
  return rstd;
}

void rmsnorm_grad_row(const float* x, const float* w, float rstd, const float* dy, int C,
                      float* dx) {
  std::vector<float> xhat(C), dxhat(C);
  for (int c = 0; c < C; ++c) {
    xhat[c] = x[c] * rstd;
    dxhat[c] = dy[c] * w[c];
  }
  const float m = row_dot(dxhat.data(), xhat.data(), C) / static_cast<float>(C);
  for (int c = 0; c < C; ++c) dx[c] += rstd * (dxhat[c] - xhat[c] * m);
}

void rmsnorm_weight_grad(const float* x, const float* rstd, const float* dy, int64_t M, int C,
                         float* dw) {
  for (int j = 0; j < C; ++j) {
    float acc = 0.0f;
    for (int64_t i = 0; i < M; ++i) acc += dy[i * C + j] * (x[i * C + j] * rstd[i]);
    dw[j] += acc;
  }
}

void rope_row(float* x, int t, int heads, int hd, float theta, float sign) {
  const int half = hd / 2;
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    const float inv = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), e));
    const double a = static_cast<float>(t) * inv;
    const float c = static_cast<float>(std::cos(a)), s = sign * static_cast<float>(std::sin(a));
    for (int h = 0; h < heads; ++h) {
      float* x1 = x + h * hd;
      const float p = x1[i], q = x1[i + half];
      x1[i] = p * c - q * s;
      x1[i + half] = q * c + p * s;
    }
  }
}

}  // namespace zs::nn::kernel_ref
