// Helpers shared by the layer tests (test_nn_layers, test_nn_llama_layers; ref_rmsnorm also by
// test_nn_llama_reference): random inputs, central finite differences of a double-precision
// reference, and the printed comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace zs::nn::layer_test {

using VecD = std::vector<double>;
using VecF = std::vector<float>;

inline VecF randf(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  VecF v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline VecD to_d(const VecF& v) { return VecD(v.begin(), v.end()); }

inline double dot(const VecD& a, const VecF& r) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}

// Numeric gradient of f at x (double), central differences.
inline VecD numeric_grad(const std::function<double(const VecD&)>& f, VecD x) {
  const double h = 1e-5;
  VecD g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline void expect_close(const char* what, const VecF& analytic, const VecD& numeric,
                         double tol = 2e-4) {
  ASSERT_EQ(analytic.size(), numeric.size());
  double max_abs = 0.0, max_rel = 0.0, scale = 1.0;
  for (double v : numeric) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < numeric.size(); ++i) {
    const double d = std::fabs(analytic[i] - numeric[i]);
    max_abs = std::max(max_abs, d);
    max_rel = std::max(max_rel, d / std::max(1e-3, std::fabs(numeric[i])));
  }
  std::printf("  %-26s n=%-5zu max abs diff %.3e  max rel diff %.3e\n", what, numeric.size(),
              max_abs, max_rel);
  EXPECT_LE(max_abs, tol * scale) << what;
}

// transformers' LlamaRMSNorm in double: x * rsqrt(mean(x^2) + eps) * w.
inline VecD ref_rmsnorm(const VecD& x, const VecD& w, int M, int C, double eps) {
  VecD y(x.size());
  for (int i = 0; i < M; ++i) {
    double ms = 0;
    for (int c = 0; c < C; ++c) ms += x[i * C + c] * x[i * C + c];
    const double rstd = 1.0 / std::sqrt(ms / C + eps);
    for (int c = 0; c < C; ++c) y[i * C + c] = x[i * C + c] * rstd * w[c];
  }
  return y;
}

// qkv [B, T, 3C] -> out [B, T, C], causal, H heads.
inline VecD ref_attention(const VecD& qkv, int B, int T, int C, int H) {
  const int hd = C / H;
  VecD out(static_cast<size_t>(B) * T * C);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        const double* q = &qkv[(b * T + i) * 3 * C + h * hd];
        VecD s(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * hd];
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[e] * k[e];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int j = 0; j <= i; ++j)
            o += s[j] / sum * qkv[(b * T + j) * 3 * C + 2 * C + h * hd + e];
          out[(b * T + i) * C + h * hd + e] = o;
        }
      }
  return out;
}

}  // namespace zs::nn::layer_test
