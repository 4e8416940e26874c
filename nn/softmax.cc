// Causal attention softmax and softmax cross-entropy, forward and backward.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
// [Note: whole blocks] The elementwise loops of a causal row run over whole 16-element blocks as
// far as the row has room (nb = n rounded up to 16, at most T); the lanes in [n, nb) are zeroed
// afterwards, so only lanes below n reach the result. GCC's scalar epilogue would take the last
// n mod 16 elements one by one (~5 ns each for the exp), more than the row's vector blocks.
int whole_blocks(int n, int T) { return std::min(T, (n + 15) / 16 * 16); }

// p[0..n) = softmax(s[0..n)), p[n..T) = 0 ([Note: whole blocks]).
ZS_SIMD_BODY(void, softmax_row, (const float* s, float* p, int n, int T)) {
  const float mx = simd::row_max(s, n);
  const int nb = whole_blocks(n, T);
  for (int j = 0; j < nb; ++j) p[j] = simd::exp_approx(s[j] - mx);
  const float inv = 1.0f / simd::row_sum(p, n);
  for (int j = 0; j < nb; ++j) p[j] *= inv;
  for (int j = n; j < T; ++j) p[j] = 0.0f;
}
ZS_SIMD_DISPATCH(void, softmax_row, (const float* s, float* p, int n, int T), (s, p, n, T))

// ds[0..n) = p (dp - dot), ds[n..T) = 0 ([Note: whole blocks]; ds may equal dp: each lane is read
// before it is written).
ZS_SIMD_BODY(void, softmax_row_grad, (const float* p, const float* dp, float* ds, int n, int T)) {
  const float dot = simd::row_dot(p, dp, n);
  const int nb = whole_blocks(n, T);
  for (int j = 0; j < nb; ++j) ds[j] = p[j] * (dp[j] - dot);
  for (int j = n; j < T; ++j) ds[j] = 0.0f;
}
ZS_SIMD_DISPATCH(void, softmax_row_grad, (const float* p, const float* dp, float* ds, int n, int T),
                 (p, dp, ds, n, T))

// probs = softmax(logits); returns logsumexp - logits[target].
ZS_SIMD_BODY(float, ce_row, (const float* logits, int target, int V, float* probs)) {
  const float mx = simd::row_max(logits, V);
  const float lt = logits[target];
  for (int j = 0; j < V; ++j) probs[j] = simd::exp_approx(logits[j] - mx);
  const float sum = simd::row_sum(probs, V);
  const float inv = 1.0f / sum;
  for (int j = 0; j < V; ++j) probs[j] *= inv;
  return std::log(sum) + mx - lt;
}
ZS_SIMD_DISPATCH(float, ce_row, (const float* logits, int target, int V, float* probs),
                 (logits, target, V, probs))

// d may alias probs (the GPT head computes the gradient in place): read probs[target] first.
ZS_SIMD_BODY(void, ce_row_grad, (const float* probs, int target, int V, float k, float* d)) {
  const float pt = probs[target];
  for (int j = 0; j < V; ++j) d[j] = probs[j] * k;
  d[target] = (pt - 1.0f) * k;
}
ZS_SIMD_DISPATCH(void, ce_row_grad, (const float* probs, int target, int V, float k, float* d),
                 (probs, target, V, k, d))
}  // namespace

void causal_softmax_forward(const float* s, float* p, int64_t BH, int T) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int i = static_cast<int>(r % T);
    softmax_row(s + r * T, p + r * T, i + 1, T);
  }
}

void causal_softmax_backward(const float* p, const float* dp, float* ds, int64_t BH, int T) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int i = static_cast<int>(r % T);
    softmax_row_grad(p + r * T, dp + r * T, ds + r * T, i + 1, T);
  }
}

void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int V,
                        float* probs, float* row_loss) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i)
    row_loss[i] = ce_row(logits + i * V, targets[i], V, probs + i * V);
}

double mean_row_loss(const float* row_loss, int64_t M) {
  double sum = 0.0;
  for (int64_t i = 0; i < M; ++i) sum += row_loss[i];
  return sum / static_cast<double>(M);
}

double cross_entropy_forward(const float* logits, const int32_t* targets, int64_t M, int V,
                             float* probs, float* row_loss) {
  cross_entropy_rows(logits, targets, M, V, probs, row_loss);
  return mean_row_loss(row_loss, M);
}

void cross_entropy_backward_rows(const float* probs, const int32_t* targets, int64_t rows, int V,
                                 float k, float* dlogits) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) ce_row_grad(probs + i * V, targets[i], V, k, dlogits + i * V);
}

void cross_entropy_backward(const float* probs, const int32_t* targets, int64_t M, int V,
                            float scale, float* dlogits) {
  cross_entropy_backward_rows(probs, targets, M, V, scale / static_cast<float>(M), dlogits);
}

}  // namespace zs::nn
