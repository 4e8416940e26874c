// Each layer's backward against central finite differences of a double-precision reference of
// its forward. The layer runs in fp32; the reference and the finite differences in double
// (h = 1e-5, truncation error ~h^2 * f''' ~ 1e-10, far below fp32 rounding), so the difference
// printed is the fp32 layer's own error. The scalar checked is L = sum(out * R) with R fixed
// random, so dL/dout = R. Tolerance: |analytic - numeric| <= 2e-4 * max(1, max|numeric|), a
// few hundred fp32 ulps of sums over <= 64 terms of O(1) values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/convert.h"
#include "nn/attention.h"
#include "nn/kernels.h"
#include "nn/linear.h"
#include "tests/nn/layer_test_helpers.h"

namespace zs::nn {
namespace {

using namespace layer_test;  // NOLINT: the shared helpers of the layer tests

// ---- double references ----
VecD ref_layernorm(const VecD& x, const VecD& w, const VecD& b, int M, int C) {
  VecD y(x.size());
  for (int i = 0; i < M; ++i) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += x[i * C + c];
    mean /= C;
    for (int c = 0; c < C; ++c) var += (x[i * C + c] - mean) * (x[i * C + c] - mean);
    var /= C;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int c = 0; c < C; ++c) y[i * C + c] = (x[i * C + c] - mean) * rstd * w[c] + b[c];
  }
  return y;
}

double ref_gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

VecD ref_linear(const VecD& x, const VecD& w, const VecD& b, int M, int in, int out) {
  VecD y(static_cast<size_t>(M) * out);
  for (int i = 0; i < M; ++i)
    for (int o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

TEST(NnLayers, LayerNorm) {
  const int M = 6, C = 40;
  VecF x = randf(M * C, 1, 2.0f), w = randf(C, 2), b = randf(C, 3), r = randf(M * C, 4);
  for (int i = 0; i < M * C; ++i) x[i] += 0.5f;  // nonzero mean
  VecF y(M * C), mean(M), rstd(M), dx(M * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_forward(x.data(), w.data(), b.data(), M, C, y.data(), DType::kF32, mean.data(),
                    rstd.data());
  layernorm_backward(x.data(), w.data(), mean.data(), rstd.data(), r.data(), M, C, dx.data(),
                     dw.data(), db.data());
  const VecD yd = ref_layernorm(to_d(x), to_d(w), to_d(b), M, C);
  expect_close("layernorm forward", y, yd, 1e-5);
  expect_close(
      "layernorm dx", dx,
      numeric_grad([&](const VecD& v) { return dot(ref_layernorm(v, to_d(w), to_d(b), M, C), r); },
                   to_d(x)));
  expect_close(
      "layernorm dw", dw,
      numeric_grad([&](const VecD& v) { return dot(ref_layernorm(to_d(x), v, to_d(b), M, C), r); },
                   to_d(w)));
  expect_close(
      "layernorm db", db,
      numeric_grad([&](const VecD& v) { return dot(ref_layernorm(to_d(x), to_d(w), v, M, C), r); },
                   to_d(b)));
}

TEST(NnLayers, Gelu) {
  const int n = 2000;
  VecF x = randf(n, 5, 3.0f), r = randf(n, 6), y(n), dx(n);
  gelu_forward(x.data(), y.data(), DType::kF32, n);
  gelu_backward(x.data(), r.data(), dx.data(), n);
  VecD yd(n), gd(n);
  for (int i = 0; i < n; ++i) {
    yd[i] = ref_gelu(x[i]);
    const double h = 1e-5;
    gd[i] = r[i] * (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h);
  }
  expect_close("gelu forward", y, yd, 1e-6);
  expect_close("gelu dx", dx, gd, 1e-5);
  // The fused form (forward keeps gelu'(x), backward multiplies) gives the same bits.
  VecF saved = x, y2(n), dx2(n);
  gelu_forward_save_grad(saved.data(), y2.data(), DType::kF32, n);
  gelu_backward_saved(saved.data(), r.data(), dx2.data(), n);
  EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(dx.data(), dx2.data(), n * sizeof(float)));
}

TEST(NnLayers, LinearFp32) {
  const int M = 5, in = 24, out = 16;
  VecF x = randf(M * in, 7), w = randf(out * in, 8, 0.3f), b = randf(out, 9),
       r = randf(M * out, 10);
  Linear lin(M, in, out, true, false, DType::kF32, nullptr);
  VecF y(M * out), dx(M * in), dw(out * in, 0.0f), db(out, 0.0f);
  lin.forward(x.data(), w.data(), b.data(), y.data());
  lin.backward_data(r.data(), w.data(), dx.data());
  lin.backward_weight(r.data(), x.data(), dw.data());
  bias_backward(r.data(), M, out, db.data());
  expect_close("linear forward", y, ref_linear(to_d(x), to_d(w), to_d(b), M, in, out), 1e-5);
  expect_close(
      "linear dx", dx,
      numeric_grad(
          [&](const VecD& v) { return dot(ref_linear(v, to_d(w), to_d(b), M, in, out), r); },
          to_d(x)));
  expect_close(
      "linear dw", dw,
      numeric_grad(
          [&](const VecD& v) { return dot(ref_linear(to_d(x), v, to_d(b), M, in, out), r); },
          to_d(w)));
  expect_close(
      "linear db", db,
      numeric_grad(
          [&](const VecD& v) { return dot(ref_linear(to_d(x), to_d(w), v, M, in, out), r); },
          to_d(b)));
  // Residual form: y += x W^T + b.
  VecF y2(M * out, 1.0f);
  Linear res(M, in, out, true, true, DType::kF32, nullptr);
  res.forward(x.data(), w.data(), b.data(), y2.data());
  VecD yr = ref_linear(to_d(x), to_d(w), to_d(b), M, in, out);
  for (auto& v : yr) v += 1.0;
  expect_close("linear residual forward", y2, yr, 1e-5);
}

// T = 5 runs one GEMM per product; T = 20 the two-GEMM causal split ([Note: causal split]).
TEST(NnLayers, CausalAttention) {
  for (int T : {5, 20}) {
    const int B = 2, C = 8, H = 2;
    VecF qkv = randf(B * T * 3 * C, 11), r = randf(B * T * C, 12);
    Attention attn(B, T, C, H, DType::kF32, nullptr);
    const int64_t bhtt = B * H * T * T, m = B * T * C;
    VecF q(m), k(m), v(m), p(bhtt), s(bhtt), o(m), dom(m), dq(m), dk(m), dv(m);
    AttentionActs acts{q.data(), k.data(), v.data(), p.data(), p.data()};
    AttentionWork work{s.data(), o.data(), dom.data(), nullptr, dq.data(), dk.data(), dv.data()};
    VecF out(m), dqkv(B * T * 3 * C);
    std::fill(s.begin(), s.end(), NAN);  // stale scores above the diagonal must not be read
    attn.forward(qkv.data(), acts, work, out.data());
    attn.backward(r.data(), acts, work, dqkv.data());
    std::printf("  T = %d\n", T);
    expect_close("attention forward", out, ref_attention(to_d(qkv), B, T, C, H), 1e-5);
    expect_close("attention dqkv", dqkv,
                 numeric_grad([&](const VecD& x) { return dot(ref_attention(x, B, T, C, H), r); },
                              to_d(qkv)));
  }
}

TEST(NnLayers, CrossEntropy) {
  const int M = 7, V = 33;
  VecF logits = randf(M * V, 13, 2.0f), probs(M * V), row(M), d(M * V);
  std::vector<int32_t> tg(M);
  for (int i = 0; i < M; ++i) tg[i] = (i * 5) % V;
  const double loss =
      cross_entropy_forward(logits.data(), tg.data(), M, V, probs.data(), row.data());
  const float scale = 8.0f;
  cross_entropy_backward(probs.data(), tg.data(), M, V, scale, d.data());
  auto ref = [&](const VecD& l) {
    double s = 0;
    for (int i = 0; i < M; ++i) {
      double mx = -1e300, sum = 0;
      for (int j = 0; j < V; ++j) mx = std::max(mx, l[i * V + j]);
      for (int j = 0; j < V; ++j) sum += std::exp(l[i * V + j] - mx);
      s += std::log(sum) + mx - l[i * V + tg[i]];
    }
    return s / M;
  };
  std::printf("  cross-entropy loss %.8f reference %.8f\n", loss, ref(to_d(logits)));
  EXPECT_NEAR(loss, ref(to_d(logits)), 1e-6 * std::fabs(loss));
  VecD g = numeric_grad(ref, to_d(logits));
  for (auto& x : g) x *= scale;  // backward is seeded with the loss scale
  expect_close("cross-entropy dlogits", d, g);
}

TEST(NnLayers, EmbeddingAndResidual) {
  const int B = 2, T = 3, C = 4, V = 5;
  std::vector<int32_t> tok = {1, 3, 1, 4, 0, 1};
  VecF wte = randf(V * C, 14), wpe = randf(T * C, 15), r = randf(B * T * C, 16);
  ParamSpec se, sp;
  ParamView ve{wte.data(), DType::kF32, V * C, &se}, vp{wpe.data(), DType::kF32, T * C, &sp};
  VecF out(B * T * C), dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  embedding_forward(tok.data(), B, T, C, ve, vp, out.data());
  embedding_backward(tok.data(), B, T, C, r.data(), dwte.data(), dwpe.data());
  auto ref = [&](const VecD& e, const VecD& p) {
    VecD o(B * T * C);
    for (int i = 0; i < B * T; ++i)
      for (int c = 0; c < C; ++c) o[i * C + c] = e[tok[i] * C + c] + p[(i % T) * C + c];
    return o;
  };
  expect_close("embedding forward", out, ref(to_d(wte), to_d(wpe)), 1e-6);
  expect_close("embedding dwte", dwte,
               numeric_grad([&](const VecD& v) { return dot(ref(v, to_d(wpe)), r); }, to_d(wte)));
  expect_close("embedding dwpe", dwpe,
               numeric_grad([&](const VecD& v) { return dot(ref(to_d(wte), v), r); }, to_d(wpe)));
  // bf16 parameters: the rows are the bf16 values.
  std::vector<uint16_t> wte16(V * C), wpe16(T * C);
  fp32_to_bf16(wte.data(), wte16.data(), wte.size());
  fp32_to_bf16(wpe.data(), wpe16.data(), wpe.size());
  ParamView be{wte16.data(), DType::kBF16, V * C, &se}, bp{wpe16.data(), DType::kBF16, T * C, &sp};
  embedding_forward(tok.data(), B, T, C, be, bp, out.data());
  EXPECT_EQ(out[5], bf16_bits_to_fp32(wte16[3 * C + 1]) + bf16_bits_to_fp32(wpe16[1 * C + 1]));
  // Residual add.
  VecF a = randf(100, 17), b2 = randf(100, 18), s(100);
  residual_add(a.data(), b2.data(), s.data(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s[i], a[i] + b2[i]);
}

// The bf16 GEMM path against fp32: on bf16-rounded inputs it matches an fp32 product (fp32
// accumulation: relative error ~1e-6); against the unrounded inputs it is within bf16 rounding
// (relative 2^-8 per input, ~2^-7 per product, averaging over K terms of random sign).
TEST(NnLayers, LinearBf16MatchesFp32) {
  const int M = 64, in = 256, out = 96;
  VecF x = randf(M * in, 19), w = randf(out * in, 20, 0.1f), b = randf(out, 21);
  std::vector<uint16_t> xb(x.size()), wb(w.size());
  fp32_to_bf16(x.data(), xb.data(), x.size());
  fp32_to_bf16(w.data(), wb.data(), w.size());
  VecF xr(x.size()), wr(w.size());
  bf16_to_fp32(xb.data(), xr.data(), x.size());
  bf16_to_fp32(wb.data(), wr.data(), w.size());
  Linear l32(M, in, out, true, false, DType::kF32, nullptr);
  Linear l16(M, in, out, true, false, DType::kBF16, nullptr);
  VecF y32(M * out), y16(M * out), yr(M * out);
  l32.forward(x.data(), w.data(), b.data(), y32.data());
  l32.forward(xr.data(), wr.data(), b.data(), yr.data());
  l16.forward(xb.data(), wb.data(), b.data(), y16.data());
  double max_rounded = 0, max_full = 0, scale = 0;
  for (int i = 0; i < M * out; ++i) {
    max_rounded = std::max(max_rounded, static_cast<double>(std::fabs(y16[i] - yr[i])));
    max_full = std::max(max_full, static_cast<double>(std::fabs(y16[i] - y32[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y32[i])));
  }
  std::printf(
      "  bf16 linear: max |y - y_fp32(rounded inputs)| %.3e, max |y - y_fp32| %.3e, "
      "max |y| %.3f\n",
      max_rounded, max_full, scale);
  std::printf("  bf16 path: %s; fp32 path: %s\n", gemm_path(DType::kBF16).name.c_str(),
              gemm_path(DType::kF32).name.c_str());
  // [Note: GEMM paths] widened, the bf16 product is the fp32 product of the rounded inputs.
  const bool widened = gemm_path(DType::kBF16).widened;
  if (widened) {
    EXPECT_EQ(max_rounded, 0.0);
  }
  EXPECT_LE(max_rounded, 1e-5 * scale);
  EXPECT_LE(max_full, 1e-2 * scale);
  EXPECT_GT(max_full, 0.0);
  // Backward: dW += dy^T x in bf16 vs fp32 on rounded inputs.
  VecF dy = randf(M * out, 22);
  std::vector<uint16_t> dyb(dy.size());
  fp32_to_bf16(dy.data(), dyb.data(), dy.size());
  VecF dyr(dy.size());
  bf16_to_fp32(dyb.data(), dyr.data(), dy.size());
  VecF dw16(out * in, 0.0f), dw32(out * in, 0.0f), dx16(M * in), dx32(M * in);
  l16.backward_weight(dyb.data(), xb.data(), dw16.data());
  l32.backward_weight(dyr.data(), xr.data(), dw32.data());
  l16.backward_data(dyb.data(), wb.data(), dx16.data());
  l32.backward_data(dyr.data(), wr.data(), dx32.data());
  double dwm = 0, dws = 0, dxm = 0, dxs = 0;
  for (size_t i = 0; i < dw16.size(); ++i) {
    dwm = std::max(dwm, static_cast<double>(std::fabs(dw16[i] - dw32[i])));
    dws = std::max(dws, static_cast<double>(std::fabs(dw32[i])));
  }
  for (size_t i = 0; i < dx16.size(); ++i) {
    dxm = std::max(dxm, static_cast<double>(std::fabs(dx16[i] - dx32[i])));
    dxs = std::max(dxs, static_cast<double>(std::fabs(dx32[i])));
  }
  std::printf("  bf16 linear backward: max dW diff %.3e (max %.3f), max dx diff %.3e (max %.3f)\n",
              dwm, dws, dxm, dxs);
  EXPECT_LE(dwm, 1e-5 * dws);
  EXPECT_LE(dxm, 1e-5 * dxs);
  if (widened) {
    EXPECT_EQ(dwm + dxm, 0.0);
  }
}

}  // namespace
}  // namespace zs::nn
