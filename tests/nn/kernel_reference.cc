// Plain scalar loops of the row kernels (kernel_reference.h); built with -fno-tree-vectorize
// -fno-tree-slp-vectorize. The reductions are nn/simd.h's own row_max/row_sum/row_dot (their
// order is fixed in the source), here compiled scalar.
#include "tests/nn/kernel_reference.h"

#include <cmath>

#include "nn/simd.h"

namespace zs::nn::kernel_ref {

namespace {
float sigmoid(float g) { return 1.0f / (1.0f + simd::exp_approx(-g)); }

// The kernels' softmax of x[0..n) into p: exp of x - max, then times 1 / sum. Returns the sum.
float softmax(const float* x, float* p, int n, float* max_out) {
  const float mx = simd::row_max(x, n);
  for (int j = 0; j < n; ++j) p[j] = simd::exp_approx(x[j] - mx);
  const float sum = simd::row_sum(p, n);
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
  const float dot = simd::row_dot(p, dp, n);
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

}  // namespace zs::nn::kernel_ref
