// The layers the Llama family adds (issue 27): RMSNorm, SwiGLU, rotary position embeddings,
// grouped-query attention. Each
// forward against a double-precision reference within a stated bound, each backward against
// central finite differences of that reference (layer_test_helpers.h states the tolerance), the
// way test_nn_layers checks the GPT's layers. Registered with an AVX2 twin, so both the AVX-512
// and the AVX2 bodies of the row kernels pass the same bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/kernels.h"
#include "tests/nn/layer_test_helpers.h"

namespace zs::nn {
namespace {

using namespace layer_test;  // NOLINT: the shared helpers of the layer tests

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

// Qwen3's per-head q/k RMSNorm: 3 heads of 20 at columns [4, 64) of rows 70 wide (a head window
// inside a wider qkv row, as the model's k heads are). Forward: bitwise rmsnorm_forward on each
// head's row; backward: bitwise rmsnorm_backward's dx per head (zeroed first), dw within fp32
// sums of rmsnorm_backward's, and both against finite differences; columns outside the heads kept.
TEST(NnLlamaLayers, RmsNormHeads) {
  const int M = 5, heads = 3, hd = 20, ld = 70, col = 4;
  const float eps = 1e-6f;
  VecF x = randf(M * ld, 41, 2.0f), w = randf(hd, 42), r = randf(M * ld, 43);
  VecF y = x, saved(M * heads * hd), rstd(M * heads);
  rmsnorm_heads_forward(y.data() + col, M, heads, hd, ld, w.data(), eps, saved.data(), rstd.data());
  VecF dx = r, dw(hd, 0.0f);
  rmsnorm_heads_backward(dx.data() + col, M, heads, hd, ld, w.data(), saved.data(), rstd.data(),
                         dw.data());
  // The same rows through the plain kernels, one head per row.
  VecF xr(M * heads * hd), dyr(M * heads * hd), yr(M * heads * hd), rr(M * heads);
  for (int i = 0; i < M; ++i)
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < hd; ++j) {
        xr[(i * heads + h) * hd + j] = x[i * ld + col + h * hd + j];
        dyr[(i * heads + h) * hd + j] = r[i * ld + col + h * hd + j];
      }
  rmsnorm_forward(xr.data(), w.data(), M * heads, hd, eps, yr.data(), DType::kF32, rr.data());
  VecF dxr(M * heads * hd, 0.0f), dwr(hd, 0.0f);
  rmsnorm_backward(xr.data(), w.data(), rr.data(), dyr.data(), M * heads, hd, dxr.data(),
                   dwr.data());
  EXPECT_EQ(saved, xr);
  EXPECT_EQ(rstd, rr);
  for (int i = 0; i < M; ++i)
    for (int c = 0; c < ld; ++c) {
      const bool in = c >= col && c < col + heads * hd;
      const int k = i * heads * hd + (c - col);
      EXPECT_EQ(y[i * ld + c], in ? yr[k] : x[i * ld + c]) << i << "," << c;
      EXPECT_EQ(dx[i * ld + c], in ? dxr[k] : r[i * ld + c]) << i << "," << c;
    }
  for (int j = 0; j < hd; ++j) EXPECT_NEAR(dw[j], dwr[j], 1e-5 * (1.0 + std::fabs(dwr[j]))) << j;
  auto loss_w = [&](const VecD& v) {
    return dot(ref_rmsnorm(to_d(xr), v, M * heads, hd, eps), dyr);
  };
  expect_close("rmsnorm heads dw", dw, numeric_grad(loss_w, to_d(w)));
  // A frozen weight (null dw) gives the same dx bits.
  VecF dx2 = r;
  rmsnorm_heads_backward(dx2.data() + col, M, heads, hd, ld, w.data(), saved.data(), rstd.data(),
                         nullptr);
  EXPECT_EQ(dx2, dx);
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

// transformers' apply_rotary_pos_emb, literally, in double, on one head q [hd] at position t:
//   inv_freq = 1 / theta^(arange(0, hd, 2) / hd); emb = cat(t * inv_freq, t * inv_freq);
//   q_embed = q * cos(emb) + rotate_half(q) * sin(emb), rotate_half(q) = cat(-q2, q1).
VecD ref_rope_head(const VecD& q, int t, double theta) {
  const int hd = static_cast<int>(q.size()), half = hd / 2;
  VecD emb(hd), rot(hd), out(hd);
  for (int i = 0; i < half; ++i) emb[i] = emb[i + half] = t / std::pow(theta, 2.0 * i / hd);
  for (int i = 0; i < half; ++i) {
    rot[i] = -q[i + half];
    rot[i + half] = q[i];
  }
  for (int i = 0; i < hd; ++i) out[i] = q[i] * std::cos(emb[i]) + rot[i] * std::sin(emb[i]);
  return out;
}

// The qkv layout of Attention ([B*T, 3C], head h at columns h*hd): q and k rotated, v not.
VecD ref_rope_qkv(const VecD& qkv, int B, int T, int H, int hd, double theta) {
  const int C = H * hd;
  VecD out = qkv;
  for (int r = 0; r < B * T; ++r)
    for (int s = 0; s < 2; ++s)
      for (int h = 0; h < H; ++h) {
        const size_t off = static_cast<size_t>(r) * 3 * C + s * C + h * hd;
        const VecD q(qkv.begin() + off, qkv.begin() + off + hd);
        const VecD e = ref_rope_head(q, r % T, theta);
        std::copy(e.begin(), e.end(), out.begin() + off);
      }
  return out;
}

// T = 40 positions (angles up to 39 rad), theta 10000 (Llama 2) and 500000 (Llama 3), hd = 40
// leaves a tail after 16-wide vectors.
TEST(NnLlamaLayers, Rope) {
  const int B = 2, T = 40, H = 3, hd = 40, C = H * hd;
  const int64_t rows = B * T, ld = 3 * C, n = rows * ld;
  for (float theta : {10000.0f, 500000.0f}) {
    const VecF x = randf(n, 51), y = randf(n, 52);
    VecF rx = x;
    rope_forward(rx.data(), rows, T, H, hd, ld, theta);      // q
    rope_forward(rx.data() + C, rows, T, H, hd, ld, theta);  // k
    // The angle t * inv_freq is rounded to fp32 (as transformers does): relative error <= 2^-23,
    // so |error| <= T * 2^-23 per unit of |x|, plus a few ulps of the products.
    std::printf("  theta = %.0f\n", theta);
    expect_close("rope forward", rx, ref_rope_qkv(to_d(x), B, T, H, hd, theta),
                 T * std::ldexp(1.0, -23) + 1e-6);
    for (int64_t r = 0; r < rows; ++r)  // v untouched, to the bit
      EXPECT_EQ(0, std::memcmp(&rx[r * ld + 2 * C], &x[r * ld + 2 * C], C * sizeof(float)));
    // Backward is the transpose: <R x, y> == <x, R^T y> (sums in double of fp32 values, each
    // within an ulp of the exact rotation).
    VecF ry = y;
    rope_backward(ry.data(), rows, T, H, hd, ld, theta);
    rope_backward(ry.data() + C, rows, T, H, hd, ld, theta);
    double lhs = 0, rhs = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      lhs += static_cast<double>(rx[i]) * y[i];
      rhs += static_cast<double>(x[i]) * ry[i];
      norm += std::fabs(static_cast<double>(x[i]) * y[i]);
    }
    std::printf("  <Rx, y> %.9f  <x, R^T y> %.9f\n", lhs, rhs);
    EXPECT_LE(std::fabs(lhs - rhs), 1e-6 * norm);
    // And it is the inverse: R^T R x == x within rounding, not x itself (R != I).
    VecF back = rx;
    rope_backward(back.data(), rows, T, H, hd, ld, theta);
    rope_backward(back.data() + C, rows, T, H, hd, ld, theta);
    expect_close("rope backward(forward(x))", back, to_d(x), 1e-6);
    EXPECT_GT(std::fabs(ry[ld + 1] - y[ld + 1]), 1e-3f);  // row 1 (t = 1) is rotated
  }
}

// transformers' repeat_kv on a qkv row layout: [B*T, C + 2 KV hd] -> [B*T, 3C], K/V head g
// copied to query heads [g*H/KV, (g+1)*H/KV).
template <typename V>
V repeat_kv(const V& qkv, int rows, int H, int KV, int hd) {
  const int C = H * hd, w = C + 2 * KV * hd;
  V out(static_cast<size_t>(rows) * 3 * C);
  for (int r = 0; r < rows; ++r)
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < H; ++h) {
        const int src = s == 0 ? h * hd : C + (s - 1) * KV * hd + h / (H / KV) * hd;
        for (int d = 0; d < hd; ++d) out[r * 3 * C + s * C + h * hd + d] = qkv[r * w + src + d];
      }
  return out;
}

struct AttentionRun {
  VecF out, dqkv;
};

// One forward and backward of `attn` on qkv (width C + 2 KV hd) with dout = r.
AttentionRun run_attention(Attention& attn, const VecF& qkv, const VecF& r, int B, int T, int C,
                           int H) {
  const int64_t bhtt = static_cast<int64_t>(B) * H * T * T, m = B * T * C;
  VecF q(m), k(m), v(m), p(bhtt), s(bhtt, NAN), o(m), dom(m), dq(m), dk(m), dv(m);
  AttentionActs acts{q.data(), k.data(), v.data(), p.data(), p.data()};
  AttentionWork work{s.data(), o.data(), dom.data(), nullptr, dq.data(), dk.data(), dv.data()};
  AttentionRun res{VecF(m), VecF(qkv.size())};
  attn.forward(qkv.data(), acts, work, res.out.data());
  attn.backward(r.data(), acts, work, res.dqkv.data());
  return res;
}

// Grouped-query attention, H = 4 query heads over KV = 2 and 1 key/value heads; T = 5 runs one
// GEMM per product, T = 20 the causal split.
TEST(NnLlamaLayers, GroupedQueryAttention) {
  const int B = 2, H = 4, hd = 4, C = H * hd;
  for (int T : {5, 20})
    for (int KV : {2, 1}) {
      const int rows = B * T, w = C + 2 * KV * hd, group = H / KV;
      const VecF qkv = randf(static_cast<size_t>(rows) * w, 61), r = randf(rows * C, 62);
      Attention gqa(B, T, C, H, KV, DType::kF32, nullptr), mha(B, T, C, H, DType::kF32, nullptr);
      const AttentionRun g = run_attention(gqa, qkv, r, B, T, C, H);
      const AttentionRun m = run_attention(mha, repeat_kv(qkv, rows, H, KV, hd), r, B, T, C, H);
      std::printf("  T = %d, KV = %d\n", T, KV);
      auto ref = [&](const VecD& x) {
        return ref_attention(repeat_kv(x, rows, H, KV, hd), B, T, C, H);
      };
      expect_close("gqa forward", g.out, ref(to_d(qkv)), 1e-5);
      expect_close("gqa dqkv", g.dqkv,
                   numeric_grad([&](const VecD& x) { return dot(ref(x), r); }, to_d(qkv)));
      // Against MHA on the repeated K/V: the same output bits; dQ the same bits, dK and dV the
      // MHA gradients of a group summed in head order.
      EXPECT_EQ(0, std::memcmp(g.out.data(), m.out.data(), g.out.size() * sizeof(float)));
      for (int i = 0; i < rows; ++i)
        for (int s = 0; s < 3; ++s)
          for (int kv = 0; kv < (s == 0 ? H : KV); ++kv)
            for (int d = 0; d < hd; ++d) {
              const int heads = s == 0 ? 1 : group, h0 = s == 0 ? kv : kv * group;
              float sum = 0.0f;
              for (int j = 0; j < heads; ++j) {
                const float x = m.dqkv[i * 3 * C + s * C + (h0 + j) * hd + d];
                sum = j == 0 ? x : sum + x;
              }
              const int col = s == 0 ? kv * hd : C + (s - 1) * KV * hd + kv * hd;
              EXPECT_EQ(g.dqkv[i * w + col + d], sum) << "s " << s << " head " << kv;
            }
    }
  // KV == H is the multi-head attention to the bit.
  const int T = 20;
  const VecF qkv = randf(B * T * 3 * C, 63), r = randf(B * T * C, 64);
  Attention a6(B, T, C, H, H, DType::kF32, nullptr), a5(B, T, C, H, DType::kF32, nullptr);
  const AttentionRun x6 = run_attention(a6, qkv, r, B, T, C, H);
  const AttentionRun x5 = run_attention(a5, qkv, r, B, T, C, H);
  EXPECT_EQ(0, std::memcmp(x6.out.data(), x5.out.data(), x5.out.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(x6.dqkv.data(), x5.dqkv.data(), x5.dqkv.size() * sizeof(float)));
  EXPECT_THROW(Attention(B, T, C, H, 3, DType::kF32, nullptr), Error);  // 4 % 3 != 0
}

}  // namespace
}  // namespace zs::nn
