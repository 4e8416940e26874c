// The dispatched row kernels (nn/kernels.h: SwiGLU, causal softmax, cross-entropy, RMSNorm,
// RoPE) against plain scalar loops (kernel_reference.h), bit for bit, at the ISA level this
// process runs (registered three times: default, _avx2 and _max_isa_scalar). Inputs mix random
// values with the extremes: |g| > 88 (exp clamped), 0, -0, subnormals, FLT_MIN; lengths are not
// multiples of 16 and cross the kernels' 1024-element chunks; the outputs the contracts let alias
// an input are checked in place too.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "nn/kernels.h"
#include "tests/nn/kernel_reference.h"

namespace zs::nn {
namespace {

using VecF = std::vector<float>;

// Random values of spread `scale`, every 7th one replaced by an extreme.
VecF inputs(size_t n, uint32_t seed, float scale) {
  static const float kExtremes[] = {0.0f,    -0.0f,  1e-40f, -3e-39f, FLT_MIN, -FLT_MIN,
                                    95.0f,   -95.0f, 88.5f,  -88.5f,  87.5f,   -87.5f,
                                    -120.0f, 300.0f, -1e20f, 1e20f,   1e-30f,  FLT_TRUE_MIN};
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  VecF v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i % 7 == 3 ? kExtremes[(i / 7 + seed) % std::size(kExtremes)] : d(rng);
  return v;
}

std::string show(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (%a)", static_cast<double>(x), static_cast<double>(x));
  return buf;
}

// Fails naming the first element whose bits differ, with both values.
void expect_bits(const std::string& what, const VecF& got, const VecF& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() << " is " << show(got[i])
                    << ", the scalar loop gives " << show(want[i]) << " at "
                    << simd_level_name(active_simd_level());
      return;
    }
  }
}

// The level follows the cap of this test's registration (ZS_MAX_ISA), where the CPU has it.
TEST(KernelIsa, RunsAtTheCappedLevel) {
  const char* cap = std::getenv("ZS_MAX_ISA");
  const SimdLevel want = cap == nullptr                 ? SimdLevel::kAvx512
                         : std::string(cap) == "scalar" ? SimdLevel::kScalar
                         : std::string(cap) == "avx2"   ? SimdLevel::kAvx2
                                                        : SimdLevel::kAvx512;
  if (simd_level_supported(want)) {
    EXPECT_EQ(active_simd_level(), want);
  }
  std::printf("kernel level: %s\n", std::string(simd_level_name(active_simd_level())).c_str());
}

const int64_t kLengths[] = {1, 15, 17, 1000, 1024 + 37, 2 * 1024 + 5};

TEST(KernelIsa, SwiGluForward) {
  for (int64_t n : kLengths) {
    const VecF gate = inputs(n, 1, 6.0f), up = inputs(n, 2, 2.0f);
    VecF y(n), want(n);
    swiglu_forward(gate.data(), up.data(), y.data(), DType::kF32, n);
    kernel_ref::swiglu_forward(gate.data(), up.data(), want.data(), n);
    expect_bits("swiglu_forward n=" + std::to_string(n), y, want);
    // bf16: the fp32 result rounded by store_as.
    std::vector<uint16_t> yb(n), wb(n);
    swiglu_forward(gate.data(), up.data(), yb.data(), DType::kBF16, n);
    store_as(want.data(), wb.data(), DType::kBF16, 0, n);
    EXPECT_EQ(yb, wb) << "swiglu_forward bf16 n=" << n;
  }
}

// Each aliasing kernels.h allows: none, dgate = gate and dup = up, dgate = dy, dup = dy.
TEST(KernelIsa, SwiGluBackward) {
  for (int64_t n : kLengths) {
    const VecF gate = inputs(n, 3, 6.0f), up = inputs(n, 4, 2.0f), dy = inputs(n, 5, 1.0f);
    VecF dg_want(n), du_want(n);
    kernel_ref::swiglu_backward(gate.data(), up.data(), dy.data(), dg_want.data(), du_want.data(),
                                n);
    const std::string at = " n=" + std::to_string(n);
    VecF dg(n), du(n);
    swiglu_backward(gate.data(), up.data(), dy.data(), dg.data(), du.data(), n);
    expect_bits("swiglu_backward dgate" + at, dg, dg_want);
    expect_bits("swiglu_backward dup" + at, du, du_want);
    VecF g2 = gate, u2 = up;
    swiglu_backward(g2.data(), u2.data(), dy.data(), g2.data(), u2.data(), n);
    expect_bits("swiglu_backward dgate in gate" + at, g2, dg_want);
    expect_bits("swiglu_backward dup in up" + at, u2, du_want);
    VecF d2 = dy, du2(n);
    swiglu_backward(gate.data(), up.data(), d2.data(), d2.data(), du2.data(), n);
    expect_bits("swiglu_backward dgate in dy" + at, d2, dg_want);
    expect_bits("swiglu_backward dup beside" + at, du2, du_want);
    VecF d3 = dy, dg3(n);
    swiglu_backward(gate.data(), up.data(), d3.data(), dg3.data(), d3.data(), n);
    expect_bits("swiglu_backward dup in dy" + at, d3, du_want);
  }
}

// The row forms over [M, 2F] (gate | up per row), F across and off the chunk size.
TEST(KernelIsa, SwiGluRows) {
  const int M = 3;
  for (int F : {5, 37, 1000, 1100}) {
    const VecF gu = inputs(size_t(M) * 2 * F, 6, 6.0f), dy = inputs(size_t(M) * F, 7, 1.0f);
    VecF y(size_t(M) * F), d(size_t(M) * 2 * F), y_want(y.size()), d_want(d.size());
    for (int m = 0; m < M; ++m) {
      const float* g = gu.data() + size_t(m) * 2 * F;
      kernel_ref::swiglu_forward(g, g + F, y_want.data() + size_t(m) * F, F);
      kernel_ref::swiglu_backward(g, g + F, dy.data() + size_t(m) * F,
                                  d_want.data() + size_t(m) * 2 * F,
                                  d_want.data() + size_t(m) * 2 * F + F, F);
    }
    swiglu_forward_rows(gu.data(), M, F, y.data(), DType::kF32);
    swiglu_backward_rows(gu.data(), dy.data(), M, F, d.data());
    expect_bits("swiglu_forward_rows F=" + std::to_string(F), y, y_want);
    expect_bits("swiglu_backward_rows F=" + std::to_string(F), d, d_want);
  }
}

// Scores with gaps beyond exp's clamp (-100, -1e4 below the row's max) and the extremes above;
// backward also with ds = dp (the attention's call).
TEST(KernelIsa, CausalSoftmax) {
  const int64_t BH = 3;
  for (int T : {1, 17, 37, 130}) {
    const size_t n = size_t(BH) * T * T;
    VecF s = inputs(n, 8, 3.0f);
    for (size_t i = 0; i < n; i += 11) s[i] = i % 2 ? -100.0f : -1e4f;
    VecF p(n), p_want(n);
    causal_softmax_forward(s.data(), p.data(), BH, T);
    for (int64_t r = 0; r < BH * T; ++r)
      kernel_ref::softmax_row(&s[r * T], int(r % T) + 1, T, &p_want[r * T]);
    const std::string at = " T=" + std::to_string(T);
    expect_bits("causal_softmax_forward" + at, p, p_want);
    const VecF dp = inputs(n, 9, 1.0f);
    VecF ds(n), ds_want(n);
    for (int64_t r = 0; r < BH * T; ++r)
      kernel_ref::softmax_grad_row(&p_want[r * T], &dp[r * T], int(r % T) + 1, T, &ds_want[r * T]);
    causal_softmax_backward(p_want.data(), dp.data(), ds.data(), BH, T);
    expect_bits("causal_softmax_backward" + at, ds, ds_want);
    VecF d2 = dp;
    causal_softmax_backward(p_want.data(), d2.data(), d2.data(), BH, T);
    expect_bits("causal_softmax_backward ds = dp" + at, d2, ds_want);
  }
}

// Cross-entropy with probs apart from and equal to logits (the model's call), backward both ways.
TEST(KernelIsa, CrossEntropy) {
  const int64_t M = 5;
  for (int V : {1, 37, 259, 1000}) {
    const VecF logits = inputs(size_t(M) * V, 10, 4.0f);
    std::vector<int32_t> tg(M);
    for (int64_t i = 0; i < M; ++i) tg[i] = static_cast<int32_t>((i * 7919) % V);
    VecF probs(logits.size()), loss(M), probs_want(logits.size()), loss_want(M);
    for (int64_t i = 0; i < M; ++i)
      loss_want[i] = kernel_ref::cross_entropy_row(&logits[i * V], V, tg[i], &probs_want[i * V]);
    const std::string at = " V=" + std::to_string(V);
    cross_entropy_forward(logits.data(), tg.data(), M, V, probs.data(), loss.data());
    expect_bits("cross_entropy_forward probs" + at, probs, probs_want);
    expect_bits("cross_entropy_forward loss" + at, loss, loss_want);
    VecF inplace = logits;
    cross_entropy_forward(inplace.data(), tg.data(), M, V, inplace.data(), loss.data());
    expect_bits("cross_entropy_forward in place" + at, inplace, probs_want);
    expect_bits("cross_entropy_forward loss in place" + at, loss, loss_want);
    VecF d(probs.size()), d_want(probs.size());
    for (int64_t i = 0; i < M; ++i)  // k = scale / M, as the kernel forms it
      kernel_ref::cross_entropy_grad_row(&probs_want[i * V], V, tg[i], 3.0f / float(M),
                                         &d_want[i * V]);
    cross_entropy_backward(probs_want.data(), tg.data(), M, V, 3.0f, d.data());
    expect_bits("cross_entropy_backward" + at, d, d_want);
    cross_entropy_backward(inplace.data(), tg.data(), M, V, 3.0f, inplace.data());
    expect_bits("cross_entropy_backward in place" + at, inplace, d_want);
  }
}

// RMSNorm at widths off the vector width: forward (y, rstd), backward dx (accumulating) and dw.
TEST(KernelIsa, RmsNorm) {
  const int64_t M = 5;
  for (int C : {1, 17, 40, 256, 1000}) {
    const size_t n = size_t(M) * C;
    const VecF x = inputs(n, 11, 2.0f), w = inputs(C, 12, 1.0f), dy = inputs(n, 13, 1.0f);
    VecF y(n), rstd(M), y_want(n), rstd_want(M);
    for (int64_t i = 0; i < M; ++i)
      rstd_want[i] = kernel_ref::rmsnorm_row(&x[i * C], w.data(), C, 1e-6f, &y_want[i * C]);
    rmsnorm_forward(x.data(), w.data(), M, C, 1e-6f, y.data(), DType::kF32, rstd.data());
    const std::string at = " C=" + std::to_string(C);
    expect_bits("rmsnorm_forward y" + at, y, y_want);
    expect_bits("rmsnorm_forward rstd" + at, rstd, rstd_want);
    VecF dx = inputs(n, 14, 1.0f), dw = inputs(C, 15, 1.0f), dx_want = dx, dw_want = dw;
    for (int64_t i = 0; i < M; ++i)
      kernel_ref::rmsnorm_grad_row(&x[i * C], w.data(), rstd_want[i], &dy[i * C], C,
                                   &dx_want[i * C]);
    kernel_ref::rmsnorm_weight_grad(x.data(), rstd_want.data(), dy.data(), M, C, dw_want.data());
    rmsnorm_backward(x.data(), w.data(), rstd_want.data(), dy.data(), M, C, dx.data(), dw.data());
    expect_bits("rmsnorm_backward dx" + at, dx, dx_want);
    expect_bits("rmsnorm_backward dw" + at, dw, dw_want);
  }
}

// Rotary embedding on q-like heads inside wider rows (ld > heads * hd), forward and transpose,
// head dims whose half is not a multiple of 16.
TEST(KernelIsa, Rope) {
  const int T = 7, rows = 2 * T, heads = 3;
  for (int hd : {2, 10, 32, 48}) {
    const int64_t ld = int64_t(heads) * hd + 5;
    const VecF x0 = inputs(size_t(rows) * ld, 16, 1.0f);
    for (float sign : {1.0f, -1.0f}) {
      VecF x = x0, want = x0;
      for (int r = 0; r < rows; ++r)
        kernel_ref::rope_row(&want[r * ld], r % T, heads, hd, 500000.0f, sign);
      (sign > 0 ? rope_forward : rope_backward)(x.data(), rows, T, heads, hd, ld, 500000.0f, {});
      expect_bits(
          std::string(sign > 0 ? "rope_forward" : "rope_backward") + " hd=" + std::to_string(hd), x,
          want);
    }
  }
}

}  // namespace
}  // namespace zs::nn
