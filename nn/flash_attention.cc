#include "nn/flash_attention.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

// Vector helpers return GCC vectors from always-inline functions inside target-specific code.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace zs::nn {

namespace {

constexpr int kT = FlashAttention::kTile;

int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

// One thread's tiles (floats, each 64-byte aligned within a 64-byte aligned set).
struct Tiles {
  float* q;   // [kT, hd] query rows
  float* dO;  // [kT, hd] output gradient rows (backward)
  float* kt;  // [hd, kT] K^T (fp32 mm reads q and the k, v rows in place)
  float* vt;  // [hd, kT] V^T (backward)
  float* kv;  // [kT, hd] V rows (forward) or K rows (backward)
  float* o;   // [kT, hd] the output accumulator (forward) or dQ (backward)
  float* p;   // [kT, kT] probabilities (forward: one row at a time)
  float* ds;  // [kT, kT] dP, then dS scaled (backward); an output row's scratch before that
  float* m;   // [kT] running max (forward), log-sum-exp (backward)
  float* l;   // [kT] running sum (forward), rowsum(dO O) (backward)
};

int64_t tile_floats(int hd) {
  const int64_t rows = pad16(static_cast<int64_t>(kT) * hd);
  return 6 * rows + 2 * kT * kT + 2 * kT;
}

Tiles carve(float* base, int hd) {
  const int64_t rows = pad16(static_cast<int64_t>(kT) * hd);
  Tiles t;
  float* p = base;
  for (float** f : {&t.q, &t.dO, &t.kt, &t.vt, &t.kv, &t.o}) {
    *f = p;
    p += rows;
  }
  t.p = p;
  t.ds = p + kT * kT;
  t.m = t.ds + kT * kT;
  t.l = t.m + kT;
  return t;
}

// The shape every item reads: Q = D + 2 KV hd is the qkv row width, Tp the row length of the
// transposed K and V (FlashAttention::padded_context).
struct Shape {
  int T, Tp, H, KV, hd, D, Q;
  float scale;
  DType mm;
};

// dst[0..n) = src[off, off + n) as fp32 (src fp32 or bf16).
inline void load_f32(const void* src, DType mm, int64_t off, int n, float* __restrict dst) {
  if (mm == DType::kF32) {
    std::memcpy(dst, static_cast<const float*>(src) + off, sizeof(float) * n);
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src) + off;
  for (int i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(s[i]) << 16);
}

// n values of x from offset off as fp32: in place when mm is fp32, else widened into dst.
inline const float* view_f32(const void* x, DType mm, int64_t off, int n, float* dst) {
  if (mm == DType::kF32) return static_cast<const float*>(x) + off;
  load_f32(x, mm, off, n, dst);
  return dst;
}

// dst[d][c] = xt[d][j0 + c] for the hd rows of xt [.., hd, Tp] at offset off, c < kT, as fp32
// (j0 + kT <= Tp: in bounds). Read in place, the rows Tp apart ran the backward 1.5x slower.
inline void load_transposed(const void* xt, DType mm, int64_t off, int Tp, int j0, int hd,
                            float* __restrict dst) {
  for (int d = 0; d < hd; ++d)
    load_f32(xt, mm, off + static_cast<int64_t>(d) * Tp + j0, kT, dst + d * kT);
}

// [Note: fused attention kernels] The products keep their partial sums in registers: a score row
// is kT / W vectors of W lanes over the reduction on d; a row of O, dQ, dK or dV is HD / W vectors
// over its keys or queries, for the head dimensions HD with a kernel of their own (32, 64, 80, 96,
// 128; others run plain loops, HD = 0). Rows go in pairs (two query rows share each K^T / V^T
// load, two outputs each K / V / Q / dO row): the chains of adds are latency-bound, and two rows
// give twice the independent sums. W is 16 on AVX-512 and 8 elsewhere: lanes and paired rows are
// independent outputs, so neither changes any sum's order and every level gives the same bits.
// Multiply then add, no FMA: an explicit FMA at every level (fmaf below AVX2) gave the same bits
// across the caps too but only ~10% here (measured 2026-11-29).
#define ZS_FA_INLINE [[gnu::always_inline]] inline

template <int W>
struct Lanes;
template <>
struct Lanes<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float type __attribute__((vector_size(64)));
};

template <int W>
ZS_FA_INLINE typename Lanes<W>::type vload(const float* p) {
  typename Lanes<W>::type v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <int W>
ZS_FA_INLINE void vstore(float* p, typename Lanes<W>::type v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// c + a b, the product rounded, then the sum (no FMA: -ffp-contract=off, as every kernel here).
template <int W>
ZS_FA_INLINE typename Lanes<W>::type muladd(float a, typename Lanes<W>::type b,
                                            typename Lanes<W>::type c) {
  return c + a * b;
}

// s_i[c] = scale * sum_d x_i[d] yt[d][c] for rows i < R (1 or 2: two rows give twice the
// independent sums, which the adds' latency needs) and the tile's first NV W columns, each sum in
// d order (yt's rows ldy apart).
template <int W, int HD, int NV, int R>
ZS_FA_INLINE void tile_rows_dot_n(const float* __restrict x0, const float* __restrict x1,
                                  const float* __restrict yt, int64_t ldy, int hd_rt, float scale,
                                  float* __restrict s0, float* __restrict s1) {
  using V = typename Lanes<W>::type;
  const int hd = HD > 0 ? HD : hd_rt;
  V acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int k = 0; k < NV; ++k) acc[i][k] = V{};
  for (int d = 0; d < hd; ++d) {
    const float* y = yt + d * ldy;
    V yv[NV];
    for (int k = 0; k < NV; ++k) yv[k] = vload<W>(y + k * W);
    for (int k = 0; k < NV; ++k) acc[0][k] = muladd<W>(x0[d], yv[k], acc[0][k]);
    if constexpr (R == 2)
      for (int k = 0; k < NV; ++k) acc[1][k] = muladd<W>(x1[d], yv[k], acc[1][k]);
  }
  for (int k = 0; k < NV; ++k) vstore<W>(s0 + k * W, acc[0][k] * scale);
  if constexpr (R == 2)
    for (int k = 0; k < NV; ++k) vstore<W>(s1 + k * W, acc[R - 1][k] * scale);
}

// The same for the first n columns (rounded up to W; the rest of s is left as it was): the keys
// of a causal row in the diagonal tile (of the longer row of two).
template <int W, int HD, int R>
ZS_FA_INLINE void tile_rows_dot(const float* x0, const float* x1, const float* yt, int64_t ldy,
                                int hd, float scale, float* s0, float* s1, int n) {
  static_assert(kT == 64 && (W == 8 || W == 16));
#define ZS_FA_DOT(nv) return tile_rows_dot_n<W, HD, nv, R>(x0, x1, yt, ldy, hd, scale, s0, s1)
  switch ((n + W - 1) / W) {
    case 1:
      ZS_FA_DOT(1);
    case 2:
      ZS_FA_DOT(2);
    case 3:
      ZS_FA_DOT(3);
    case 4:
      ZS_FA_DOT(4);
  }
  if constexpr (W == 8) {
    switch ((n + W - 1) / W) {
      case 5:
        ZS_FA_DOT(5);
      case 6:
        ZS_FA_DOT(6);
      case 7:
        ZS_FA_DOT(7);
      default:
        ZS_FA_DOT(8);
    }
  }
#undef ZS_FA_DOT
}

// o[d] = o[d] * alpha + sum_{c < n} p[c ps] y[c][d], in c order (alpha applied first; y's rows
// ldy apart).
template <int W, int HD>
ZS_FA_INLINE void tile_row_axpy(float alpha, const float* __restrict p, int ps, int n,
                                const float* __restrict y, int64_t ldy, int hd_rt,
                                float* __restrict o) {
  if constexpr (HD == 0) {
    const int hd = hd_rt;
    if (alpha != 1.0f)
      for (int d = 0; d < hd; ++d) o[d] *= alpha;
    for (int c = 0; c < n; ++c) {
      const float pc = p[c * ps];
      const float* yr = y + c * ldy;
      for (int d = 0; d < hd; ++d) o[d] += pc * yr[d];
    }
  } else {
    using V = typename Lanes<W>::type;
    static_assert(HD % W == 0);
    constexpr int kV = HD / W;
    V acc[kV];
    for (int k = 0; k < kV; ++k) acc[k] = vload<W>(o + k * W);
    if (alpha != 1.0f)
      for (int k = 0; k < kV; ++k) acc[k] *= alpha;
    for (int c = 0; c < n; ++c) {
      const float pc = p[c * ps];
      const float* yr = y + c * ldy;
      for (int k = 0; k < kV; ++k) acc[k] = muladd<W>(pc, vload<W>(yr + k * W), acc[k]);
    }
    for (int k = 0; k < kV; ++k) vstore<W>(o + k * W, acc[k]);
  }
}

// Two rows of tile_row_axpy sharing y: o_i[d] = o_i[d] alpha_i + sum_{c in [s_i, e_i)} p_i[c ps]
// y[c][d], each in c order (s0 <= s1, e0 <= e1 or the reverse roles handled by the three parts).
template <int W, int HD>
ZS_FA_INLINE void tile_rows_axpy2(float a0, float a1, const float* __restrict p0,
                                  const float* __restrict p1, int ps, int s0, int e0, int s1,
                                  int e1, const float* __restrict y, int64_t ldy, int hd_rt,
                                  float* __restrict o0, float* __restrict o1) {
  if constexpr (HD == 0) {
    tile_row_axpy<W, HD>(a0, p0 + s0 * ps, ps, e0 - s0, y + s0 * ldy, ldy, hd_rt, o0);
    tile_row_axpy<W, HD>(a1, p1 + s1 * ps, ps, e1 - s1, y + s1 * ldy, ldy, hd_rt, o1);
  } else {
    using V = typename Lanes<W>::type;
    constexpr int kV = HD / W;
    V acc0[kV], acc1[kV];
    for (int k = 0; k < kV; ++k) {
      acc0[k] = vload<W>(o0 + k * W);
      acc1[k] = vload<W>(o1 + k * W);
    }
    if (a0 != 1.0f)
      for (int k = 0; k < kV; ++k) acc0[k] *= a0;
    if (a1 != 1.0f)
      for (int k = 0; k < kV; ++k) acc1[k] *= a1;
    const int lo = std::max(s0, s1), hi = std::min(e0, e1);
    for (int c = s0; c < std::min(lo, e0); ++c)  // o0 alone before o1's start
      for (int k = 0; k < kV; ++k)
        acc0[k] = muladd<W>(p0[c * ps], vload<W>(y + c * ldy + k * W), acc0[k]);
    for (int c = s1; c < std::min(lo, e1); ++c)  // o1 alone before o0's start
      for (int k = 0; k < kV; ++k)
        acc1[k] = muladd<W>(p1[c * ps], vload<W>(y + c * ldy + k * W), acc1[k]);
    for (int c = lo; c < hi; ++c) {
      const float* yr = y + c * ldy;
      for (int k = 0; k < kV; ++k) {
        const V yv = vload<W>(yr + k * W);
        acc0[k] = muladd<W>(p0[c * ps], yv, acc0[k]);
        acc1[k] = muladd<W>(p1[c * ps], yv, acc1[k]);
      }
    }
    for (int c = std::max(hi, lo); c < e0; ++c)  // o0 alone after o1's end
      for (int k = 0; k < kV; ++k)
        acc0[k] = muladd<W>(p0[c * ps], vload<W>(y + c * ldy + k * W), acc0[k]);
    for (int c = std::max(hi, lo); c < e1; ++c)  // o1 alone after o0's end
      for (int k = 0; k < kV; ++k)
        acc1[k] = muladd<W>(p1[c * ps], vload<W>(y + c * ldy + k * W), acc1[k]);
    for (int k = 0; k < kV; ++k) {
      vstore<W>(o0 + k * W, acc0[k]);
      vstore<W>(o1 + k * W, acc1[k]);
    }
  }
}

// Query rows [i0, i0 + kT) of head h of sequence b: O and the log-sum-exp, over key tiles in
// order with the online softmax (running max m, running sum l, O rescaled by exp(m_old - m_new)).
template <int W, int HD>
ZS_FA_INLINE void forward_tile(const Shape& sh, const FlashAttentionActs& a, int64_t b, int h,
                               int i0, float* tiles, void* out) {
  const int T = sh.T, hd = HD > 0 ? HD : sh.hd;
  const int g = h / (sh.H / sh.KV);
  const int nr = std::min(kT, T - i0);
  const Tiles t = carve(tiles, hd);
  const int64_t kv0 = (b * sh.KV + g) * T * hd, kt0 = (b * sh.KV + g) * hd * sh.Tp;
  const float* q = view_f32(a.q, sh.mm, ((b * sh.H + h) * T + i0) * hd, nr * hd, t.q);
  for (int r = 0; r < nr; ++r) {
    t.m[r] = -INFINITY;
    t.l[r] = 0.0f;
  }
  std::fill(t.o, t.o + nr * hd, 0.0f);
  for (int j0 = 0; j0 < i0 + nr; j0 += kT) {
    const int nc = std::min(kT, i0 + nr - j0);  // keys past the last row's are masked for all
    load_transposed(a.kt, sh.mm, kt0, sh.Tp, j0, hd, t.kt);
    const float* v = view_f32(a.v, sh.mm, kv0 + static_cast<int64_t>(j0) * hd, nc * hd, t.kv);
    // The online softmax of row r on its scores p (n keys): returns O's rescaling factor.
    auto softmax_step = [&](int r, float* p, int n) {
      const int nb = (n + W - 1) / W * W;  // whole vectors of the row's keys
      const float m_old = t.m[r];
      const float m_new = std::max(m_old, simd::row_max(p, n));
      const float alpha = m_old == -INFINITY ? 0.0f : simd::exp_approx(m_old - m_new);
      for (int c = 0; c < nb; ++c) p[c] = simd::exp_approx(p[c] - m_new);
      for (int c = n; c < kT; ++c) p[c] = 0.0f;
      t.l[r] = t.l[r] * alpha + simd::row_sum(p, kT);
      t.m[r] = m_new;
      return alpha;
    };
    for (int r = 0; r < nr; r += 2) {  // rows in pairs ([Note: fused attention kernels])
      const int n0 = std::min(nc, i0 + r - j0 + 1);  // keys <= the row's position; >= 1
      float *p0 = t.p, *p1 = t.p + kT, *o0 = t.o + r * hd;
      if (r + 1 == nr) {
        tile_rows_dot<W, HD, 1>(q + r * hd, nullptr, t.kt, kT, hd, sh.scale, p0, nullptr, n0);
        tile_row_axpy<W, HD>(softmax_step(r, p0, n0), p0, 1, n0, v, hd, hd, o0);
        continue;
      }
      const int n1 = std::min(nc, i0 + r - j0 + 2);
      tile_rows_dot<W, HD, 2>(q + r * hd, q + (r + 1) * hd, t.kt, kT, hd, sh.scale, p0, p1, n1);
      const float a0 = softmax_step(r, p0, n0), a1 = softmax_step(r + 1, p1, n1);
      tile_rows_axpy2<W, HD>(a0, a1, p0, p1, 1, 0, n0, 0, n1, v, hd, hd, o0, o0 + hd);
    }
  }
  for (int r = 0; r < nr; ++r) {
    float* o = t.o + r * hd;
    const float inv = 1.0f / t.l[r];
    for (int d = 0; d < hd; ++d) o[d] *= inv;
    const int64_t row = b * T + i0 + r;
    store_as(o, out, sh.mm, row * sh.D + static_cast<int64_t>(h) * hd, hd);
    a.lse[(b * sh.H + h) * T + i0 + r] = t.m[r] + std::log(t.l[r]);
  }
}

// Key/value head g of sequence b: dK and dV of its rows (over the group's query heads in order,
// then query tiles, then rows) and dQ of the group's query heads. P is recomputed from Q, K and
// the log-sum-exp; dP = dO V^T; dS = P (dP - rowsum(dO O)) scale.
template <int W, int HD>
ZS_FA_INLINE void backward_group(const Shape& sh, const FlashAttentionActs& a, const float* dout,
                                 const void* out, int64_t b, int g, float* tiles, float* dqkv) {
  const int T = sh.T, hd = HD > 0 ? HD : sh.hd, group = sh.H / sh.KV;
  const int64_t Q = sh.Q;
  const int64_t koff = sh.D + static_cast<int64_t>(g) * hd;
  const int64_t voff = sh.D + static_cast<int64_t>(sh.KV + g) * hd;
  const Tiles t = carve(tiles, hd);
  for (int i = 0; i < T; ++i) {
    float* row = dqkv + (b * T + i) * Q;
    std::fill(row + koff, row + koff + hd, 0.0f);
    std::fill(row + voff, row + voff + hd, 0.0f);
  }
  const int64_t kv0 = (b * sh.KV + g) * T * hd, kt0 = (b * sh.KV + g) * hd * sh.Tp;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i0 = 0; i0 < T; i0 += kT) {
      const int nr = std::min(kT, T - i0);
      const float* q = view_f32(a.q, sh.mm, ((b * sh.H + h) * T + i0) * hd, nr * hd, t.q);
      const float* dO = t.dO;  // [nr, hd]
      for (int r = 0; r < nr; ++r) {
        const int64_t at = (b * T + i0 + r) * sh.D + static_cast<int64_t>(h) * hd;
        std::memcpy(t.dO + r * hd, dout + at, sizeof(float) * hd);
        const float* o = view_f32(out, sh.mm, at, hd, t.ds);  // hd <= kT * kT
        t.l[r] = simd::row_dot(dO + r * hd, o, hd);
        t.m[r] = a.lse[(b * sh.H + h) * T + i0 + r];
      }
      std::fill(t.o, t.o + nr * hd, 0.0f);
      for (int j0 = 0; j0 < i0 + nr; j0 += kT) {
        const int nc = std::min(kT, i0 + nr - j0);
        load_transposed(a.kt, sh.mm, kt0, sh.Tp, j0, hd, t.kt);
        load_transposed(a.vt, sh.mm, kt0, sh.Tp, j0, hd, t.vt);
        const float* k = view_f32(a.k, sh.mm, kv0 + static_cast<int64_t>(j0) * hd, nc * hd, t.kv);
        // P from the scores and dS = P (dP - D) scale of row r (n keys; columns [n, nb) of P
        // and dS come out 0, later ones are never read: only keys <= the row's).
        auto ds_step = [&](int r, int n) {
          const int nb = (n + W - 1) / W * W;
          float* p = t.p + r * kT;
          float* ds = t.ds + r * kT;
          for (int c = 0; c < nb; ++c) p[c] = simd::exp_approx(p[c] - t.m[r]);
          for (int c = n; c < nb; ++c) p[c] = 0.0f;
          const float dr = t.l[r];
          for (int c = 0; c < nb; ++c) ds[c] = p[c] * (ds[c] - dr) * sh.scale;
        };
        for (int r = 0; r < nr; r += 2) {  // rows in pairs ([Note: fused attention kernels])
          const int n0 = std::min(nc, i0 + r - j0 + 1);
          float *p0 = t.p + r * kT, *ds0 = t.ds + r * kT, *dq0 = t.o + r * hd;
          if (r + 1 == nr) {
            tile_rows_dot<W, HD, 1>(q + r * hd, nullptr, t.kt, kT, hd, sh.scale, p0, nullptr, n0);
            tile_rows_dot<W, HD, 1>(dO + r * hd, nullptr, t.vt, kT, hd, 1.0f, ds0, nullptr,
                                    n0);  // dP
            ds_step(r, n0);
            tile_row_axpy<W, HD>(1.0f, ds0, 1, n0, k, hd, hd, dq0);  // dQ += dS K
            continue;
          }
          const int n1 = std::min(nc, i0 + r - j0 + 2);
          tile_rows_dot<W, HD, 2>(q + r * hd, q + (r + 1) * hd, t.kt, kT, hd, sh.scale, p0, p0 + kT,
                                  n1);
          tile_rows_dot<W, HD, 2>(dO + r * hd, dO + (r + 1) * hd, t.vt, kT, hd, 1.0f, ds0, ds0 + kT,
                                  n1);  // dP
          ds_step(r, n0);
          ds_step(r + 1, n1);
          tile_rows_axpy2<W, HD>(1.0f, 1.0f, ds0, ds0 + kT, 1, 0, n0, 0, n1, k, hd, hd, dq0,
                                 dq0 + hd);  // dQ += dS K
        }
        // dK += dS^T Q, dV += P^T dO over the rows that see key j0 + c, in row order; keys in
        // pairs.
        for (int c = 0; c < nc; c += 2) {
          float* dk = dqkv + (b * T + j0 + c) * Q + koff;
          float* dv = dqkv + (b * T + j0 + c) * Q + voff;
          const int r0 = std::max(0, j0 + c - i0);
          if (c + 1 == nc) {
            tile_row_axpy<W, HD>(1.0f, t.ds + r0 * kT + c, kT, nr - r0, q + r0 * hd, hd, hd, dk);
            tile_row_axpy<W, HD>(1.0f, t.p + r0 * kT + c, kT, nr - r0, dO + r0 * hd, hd, hd, dv);
            continue;
          }
          const int r1 = std::max(0, j0 + c + 1 - i0);
          tile_rows_axpy2<W, HD>(1.0f, 1.0f, t.ds + c, t.ds + c + 1, kT, r0, nr, r1, nr, q, hd, hd,
                                 dk, dk + Q);
          tile_rows_axpy2<W, HD>(1.0f, 1.0f, t.p + c, t.p + c + 1, kT, r0, nr, r1, nr, dO, hd, hd,
                                 dv, dv + Q);
        }
      }
      for (int r = 0; r < nr; ++r)
        std::memcpy(dqkv + (b * T + i0 + r) * Q + static_cast<int64_t>(h) * hd, t.o + r * hd,
                    sizeof(float) * hd);
    }
  }
}

// The head dimensions with a kernel of their own ([Note: fused attention kernels]).
#define ZS_FA_BY_HD(call, W, ...)       \
  switch (sh.hd) {                      \
    case 32:                            \
      return call<W, 32>(__VA_ARGS__);  \
    case 64:                            \
      return call<W, 64>(__VA_ARGS__);  \
    case 80:                            \
      return call<W, 80>(__VA_ARGS__);  \
    case 96:                            \
      return call<W, 96>(__VA_ARGS__);  \
    case 128:                           \
      return call<W, 128>(__VA_ARGS__); \
    default:                            \
      return call<W, 0>(__VA_ARGS__);   \
  }

template <int W>
ZS_FA_INLINE void forward_item_body(const Shape& sh, const FlashAttentionActs& a, int64_t b, int h,
                                    int i0, float* tiles, void* out) {
  ZS_FA_BY_HD(forward_tile, W, sh, a, b, h, i0, tiles, out)
}
template <int W>
ZS_FA_INLINE void backward_item_body(const Shape& sh, const FlashAttentionActs& a,
                                     const float* dout, const void* out, int64_t b, int g,
                                     float* tiles, float* dqkv) {
  ZS_FA_BY_HD(backward_group, W, sh, a, dout, out, b, g, tiles, dqkv)
}

// [Note: dispatched kernels] in core/simd_dispatch.h, by hand: the lane count W differs by level.
#if defined(__x86_64__) && defined(__GNUC__)
#define ZS_FA_AVX512 gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c"), gnu::flatten
#define ZS_FA_AVX2 gnu::target("avx2,f16c"), gnu::flatten
[[ZS_FA_AVX512]] void forward_item_avx512(const Shape& sh, const FlashAttentionActs& a, int64_t b,
                                          int h, int i0, float* tiles, void* out) {
  forward_item_body<16>(sh, a, b, h, i0, tiles, out);
}
[[ZS_FA_AVX2]] void forward_item_avx2(const Shape& sh, const FlashAttentionActs& a, int64_t b,
                                      int h, int i0, float* tiles, void* out) {
  forward_item_body<8>(sh, a, b, h, i0, tiles, out);
}
[[ZS_FA_AVX512]] void backward_item_avx512(const Shape& sh, const FlashAttentionActs& a,
                                           const float* dout, const void* out, int64_t b, int g,
                                           float* tiles, float* dqkv) {
  backward_item_body<16>(sh, a, dout, out, b, g, tiles, dqkv);
}
[[ZS_FA_AVX2]] void backward_item_avx2(const Shape& sh, const FlashAttentionActs& a,
                                       const float* dout, const void* out, int64_t b, int g,
                                       float* tiles, float* dqkv) {
  backward_item_body<8>(sh, a, dout, out, b, g, tiles, dqkv);
}
#endif

[[gnu::flatten]] void forward_item(const Shape& sh, const FlashAttentionActs& a, int64_t b, int h,
                                   int i0, float* tiles, void* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (active_simd_level()) {
    case SimdLevel::kAvx512:
      return forward_item_avx512(sh, a, b, h, i0, tiles, out);
    case SimdLevel::kAvx2:
      return forward_item_avx2(sh, a, b, h, i0, tiles, out);
    default:
      break;
  }
#endif
  forward_item_body<8>(sh, a, b, h, i0, tiles, out);
}

[[gnu::flatten]] void backward_item(const Shape& sh, const FlashAttentionActs& a, const float* dout,
                                    const void* out, int64_t b, int g, float* tiles, float* dqkv) {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (active_simd_level()) {
    case SimdLevel::kAvx512:
      return backward_item_avx512(sh, a, dout, out, b, g, tiles, dqkv);
    case SimdLevel::kAvx2:
      return backward_item_avx2(sh, a, dout, out, b, g, tiles, dqkv);
    default:
      break;
  }
#endif
  backward_item_body<8>(sh, a, dout, out, b, g, tiles, dqkv);
}

}  // namespace

FlashAttention::FlashAttention(int B, int T, int D, int H, int KV, DType mm, int threads)
    : B_(B), T_(T), D_(D), H_(H), KV_(KV), hd_(H > 0 ? D / H : 0), threads_(threads), mm_(mm) {
  ZS_CHECK(B >= 1 && T >= 1 && H >= 1 && D % H == 0 && hd_ >= 1, ErrorCode::kInvalidArgument,
           "flash attention: batch {}, context {}, width {}, heads {}: need positive sizes and a "
           "width divisible by the heads",
           B, T, D, H);
  ZS_CHECK(KV >= 1 && H % KV == 0, ErrorCode::kInvalidArgument,
           "flash attention: heads {} not divisible by key/value heads {}", H, KV);
  ZS_CHECK(hd_ <= kT * kT, ErrorCode::kInvalidArgument,
           "flash attention: head dimension {} above {}", hd_, kT * kT);
  ZS_CHECK(mm == DType::kF32 || mm == DType::kBF16, ErrorCode::kInvalidArgument,
           "flash attention: mm dtype {} is not fp32 or bf16", dtype_name(mm));
  ZS_CHECK(threads >= 1, ErrorCode::kInvalidArgument, "flash attention: threads {} < 1", threads);
}

// 16 floats past a whole tile: a power-of-two row length would put a tile's hd rows into a few
// cache sets.
int FlashAttention::padded_context(int T) { return (T + kT - 1) / kT * kT + 16; }

int64_t FlashAttention::tiles_bytes(int hd, int threads) {
  return static_cast<int64_t>(threads) * tile_floats(hd) * static_cast<int64_t>(sizeof(float));
}

void FlashAttention::forward(const float* qkv, const FlashAttentionActs& a, float* tiles,
                             void* out) const {
  const int hd = hd_;
  const int64_t rows = static_cast<int64_t>(B_) * T_, Q = D_ + 2 * static_cast<int64_t>(KV_) * hd;
  // Split heads: q [B, H, T, hd], k and v [B, KV, T, hd], and k, v transposed [B, KV, hd, Tp]
  // (columns [T, Tp) zero), in mm.
  const int Tp = padded_context(T_);
  const size_t e = dtype_size(mm_);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    const float* x = qkv + r * Q;
    for (int h = 0; h < H_; ++h) store_as(x + h * hd, a.q, mm_, ((b * H_ + h) * T_ + t) * hd, hd);
    alignas(64) uint16_t row16[kT * kT];  // one bf16 row (hd <= kT * kT)
    for (int g = 0; g < KV_; ++g) {
      const int64_t at = ((b * KV_ + g) * T_ + t) * hd, at_t = (b * KV_ + g) * hd * Tp + t;
      for (int s = 0; s < 2; ++s) {
        const float* src = x + D_ + (s * KV_ + g) * hd;
        store_as(src, s == 0 ? a.k : a.v, mm_, at, hd);
        void* xt = s == 0 ? a.kt : a.vt;
        if (mm_ == DType::kF32) {
          float* dst = static_cast<float*>(xt) + at_t;
          for (int d = 0; d < hd; ++d) dst[static_cast<int64_t>(d) * Tp] = src[d];
        } else {
          store_as(src, row16, mm_, 0, hd);
          uint16_t* dst = static_cast<uint16_t*>(xt) + at_t;
          for (int d = 0; d < hd; ++d) dst[static_cast<int64_t>(d) * Tp] = row16[d];
        }
      }
    }
    if (t == T_ - 1 && Tp > T_)  // the last row of a sequence zeroes the padding columns
      for (int g = 0; g < KV_; ++g)
        for (void* xt : {a.kt, a.vt})
          for (int d = 0; d < hd; ++d)
            std::memset(static_cast<char*>(xt) + ((b * KV_ + g) * hd * Tp + d * Tp + T_) * e, 0,
                        (Tp - T_) * e);
  }
  const Shape sh{T_,
                 padded_context(T_),
                 H_,
                 KV_,
                 hd,
                 D_,
                 static_cast<int>(Q),
                 1.0f / std::sqrt(static_cast<float>(hd)),
                 mm_};
  const int tiles_per_head = (T_ + kT - 1) / kT;
  const int64_t items = static_cast<int64_t>(B_) * H_ * tiles_per_head;
  const int64_t stride = tile_floats(hd);
#pragma omp parallel num_threads(threads_)
  {
    float* mine = tiles + omp_get_thread_num() * stride;
    // The longest items (the last query tiles) first; any schedule gives the same bits.
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int qt = tiles_per_head - 1 - static_cast<int>(it % tiles_per_head);
      const int64_t bh = it / tiles_per_head;
      forward_item(sh, a, bh / H_, static_cast<int>(bh % H_), qt * kT, mine, out);
    }
  }
}

void FlashAttention::backward(const float* dout, const FlashAttentionActs& a, const void* out,
                              float* tiles, float* dqkv) const {
  const int hd = hd_;
  const int64_t Q = D_ + 2 * static_cast<int64_t>(KV_) * hd;
  const Shape sh{T_,
                 padded_context(T_),
                 H_,
                 KV_,
                 hd,
                 D_,
                 static_cast<int>(Q),
                 1.0f / std::sqrt(static_cast<float>(hd)),
                 mm_};
  const int64_t items = static_cast<int64_t>(B_) * KV_;
  const int64_t stride = tile_floats(hd);
#pragma omp parallel num_threads(threads_)
  {
    float* mine = tiles + omp_get_thread_num() * stride;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it)
      backward_item(sh, a, dout, out, it / KV_, static_cast<int>(it % KV_), mine, dqkv);
  }
}

}  // namespace zs::nn
