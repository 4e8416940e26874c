// Helpers for the elementwise kernels: run-time dispatch of a kernel body compiled for AVX-512,
// AVX2 and the baseline (no global -march), a vectorizable exp and tanh, and row reductions
// written with 16 independent partial sums ([Note: row reductions]) so they vectorize without
// reassociating (the result is the same at every level: the order is fixed in the source, and
// -ffp-contract=off keeps FMAs out).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/simd_dispatch.h"

namespace zs::nn::simd {

// exp(x) for x in [-87, 88] (clamped outside), Cephes polynomial, ~1 ulp; no libm call so loops
// over it vectorize.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // Round to nearest by the 1.5 * 2^23 trick: no floor call (which blocks vectorization
  // without -fno-trapping-math), exact for |t| < 2^22.
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t e = static_cast<int32_t>(n) + 127;
  return p * std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

// tanh(x), the rational approximation Eigen uses for float (max error a few ulp).
inline float tanh_approx(float x) {
  const float c = 7.90531110763549805f;
  const float xc = std::min(std::max(x, -c), c);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float t = p / q;
  return std::fabs(x) < 0.0004f ? x : t;
}

// [Note: row reductions] 16 partial results, lane j taking elements i with i mod 16 = j over the
// whole 16-element blocks, then combined in lane order 0..15, then the tail in order: the order
// is fixed in the source, so every level gives the same bits. row_sum and row_dot keep 16 scalar
// partials, which GCC turns into good code at every level. row_max keeps them as four GCC vectors
// of 4 floats (lanes 4k .. 4k+3 in vector k), which every level has natively: as 16 scalars GCC
// vectorized its block loop only across 16 blocks at a time (256 elements) and ran shorter rows,
// e.g. every causal-softmax row at T = 128, as scalar max chains, 3-4x slower (one 16-float
// vector instead is lowered element by element below AVX-512). Measured 2026-11-27;
// kernel_isa_test checks the bits.
inline float row_sum(const float* x, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  float s = 0.0f;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += x[i];
  return s;
}

// std::max's rule (a < b ? b : a), lane by lane over the blocks, then in order.
inline float row_max(const float* x, int n) {
  using Lanes4 = float __attribute__((vector_size(16)));
  Lanes4 acc[4];
  for (Lanes4& a : acc) a = Lanes4{} - INFINITY;
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) {
      Lanes4 v;
      __builtin_memcpy(&v, x + i + 4 * k, sizeof v);  // x need not be aligned
      acc[k] = acc[k] < v ? v : acc[k];
    }
  float m = -INFINITY;
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 4; ++l) m = std::max(m, acc[k][l]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

inline float row_dot(const float* x, const float* y, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j] * y[i + j];
  float s = 0.0f;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

}  // namespace zs::nn::simd
