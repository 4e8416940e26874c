#include "nn/flash_attention.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {

constexpr int kT = FlashAttention::kTile;

int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

// One thread's tiles (floats, each 64-byte aligned within a 64-byte aligned set).
struct Tiles {
  float* q;   // [kT, hd] query rows
  float* dO;  // [kT, hd] output gradient rows (backward)
  float* kt;  // [hd, kT] K^T; key columns past the tile's keys are zero
  float* vt;  // [hd, kT] V^T (backward), the same
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

// The shape every item reads: Q = D + 2 KV hd is the qkv row width.
struct Shape {
  int T, H, KV, hd, D, Q;
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

// xt[d kT + c] = x[row0 + c][d] for c < nc, 0 for c in [nc, kT): rows of hd from offset off.
inline void load_transposed(const void* x, DType mm, int64_t off, int nc, int hd,
                            float* __restrict xt) {
  for (int c = nc; c < kT; ++c)
    for (int d = 0; d < hd; ++d) xt[d * kT + c] = 0.0f;
  if (mm == DType::kF32) {
    const float* s = static_cast<const float*>(x) + off;
    for (int c = 0; c < nc; ++c)
      for (int d = 0; d < hd; ++d) xt[d * kT + c] = s[c * hd + d];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(x) + off;
  for (int c = 0; c < nc; ++c)
    for (int d = 0; d < hd; ++d)
      xt[d * kT + c] = std::bit_cast<float>(static_cast<uint32_t>(s[c * hd + d]) << 16);
}

// s[c] = scale * sum_d x[d] yt[d][c] for the tile's kT columns, each sum in d order.
inline void tile_row_dot(const float* __restrict x, const float* __restrict yt, int hd, float scale,
                         float* __restrict s) {
  float acc[kT];
  for (int c = 0; c < kT; ++c) acc[c] = 0.0f;
  for (int d = 0; d < hd; ++d) {
    const float xd = x[d];
    const float* y = yt + d * kT;
    for (int c = 0; c < kT; ++c) acc[c] += xd * y[c];
  }
  for (int c = 0; c < kT; ++c) s[c] = acc[c] * scale;
}

// o[d] += sum_{c < n} p[c] y[c][d], in c order.
inline void tile_row_axpy(const float* __restrict p, int n, const float* __restrict y, int hd,
                          float* __restrict o) {
  for (int c = 0; c < n; ++c) {
    const float pc = p[c];
    const float* yr = y + c * hd;
    for (int d = 0; d < hd; ++d) o[d] += pc * yr[d];
  }
}

// Query rows [i0, i0 + kT) of head h of sequence b: O and the log-sum-exp, over key tiles in
// order with the online softmax (running max m, running sum l, O rescaled by exp(m_old - m_new)).
ZS_SIMD_BODY(void, forward_item,
             (const Shape& sh, const FlashAttentionActs& a, int64_t b, int h, int i0, float* tiles,
              void* out)) {
  const int T = sh.T, hd = sh.hd;
  const int g = h / (sh.H / sh.KV);
  const int nr = std::min(kT, T - i0);
  const Tiles t = carve(tiles, hd);
  const int64_t kv0 = (b * sh.KV + g) * T * hd;
  load_f32(a.q, sh.mm, ((b * sh.H + h) * T + i0) * hd, nr * hd, t.q);
  for (int r = 0; r < nr; ++r) {
    t.m[r] = -INFINITY;
    t.l[r] = 0.0f;
  }
  std::fill(t.o, t.o + nr * hd, 0.0f);
  for (int j0 = 0; j0 < i0 + nr; j0 += kT) {
    const int nc = std::min(kT, i0 + nr - j0);  // keys past the last row's are masked for all
    load_transposed(a.k, sh.mm, kv0 + static_cast<int64_t>(j0) * hd, nc, hd, t.kt);
    load_f32(a.v, sh.mm, kv0 + static_cast<int64_t>(j0) * hd, nc * hd, t.kv);
    for (int r = 0; r < nr; ++r) {
      const int n = std::min(nc, i0 + r - j0 + 1);  // keys <= the row's position; >= 1
      float* p = t.p;
      tile_row_dot(t.q + r * hd, t.kt, hd, sh.scale, p);
      const float m_old = t.m[r];
      const float m_new = std::max(m_old, simd::row_max(p, n));
      const float alpha = m_old == -INFINITY ? 0.0f : simd::exp_approx(m_old - m_new);
      for (int c = 0; c < kT; ++c) p[c] = simd::exp_approx(p[c] - m_new);
      for (int c = n; c < kT; ++c) p[c] = 0.0f;
      t.l[r] = t.l[r] * alpha + simd::row_sum(p, kT);
      float* o = t.o + r * hd;
      for (int d = 0; d < hd; ++d) o[d] *= alpha;
      tile_row_axpy(p, n, t.kv, hd, o);
      t.m[r] = m_new;
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
ZS_SIMD_DISPATCH(void, forward_item,
                 (const Shape& sh, const FlashAttentionActs& a, int64_t b, int h, int i0,
                  float* tiles, void* out),
                 (sh, a, b, h, i0, tiles, out))

// Key/value head g of sequence b: dK and dV of its rows (over the group's query heads in order,
// then query tiles, then rows) and dQ of the group's query heads. P is recomputed from Q, K and
// the log-sum-exp; dP = dO V^T; dS = P (dP - rowsum(dO O)) scale.
ZS_SIMD_BODY(void, backward_item,
             (const Shape& sh, const FlashAttentionActs& a, const float* dout, const void* out,
              int64_t b, int g, float* tiles, float* dqkv)) {
  const int T = sh.T, hd = sh.hd, group = sh.H / sh.KV;
  const int64_t Q = sh.Q;
  const int64_t koff = sh.D + static_cast<int64_t>(g) * hd;
  const int64_t voff = sh.D + static_cast<int64_t>(sh.KV + g) * hd;
  const Tiles t = carve(tiles, hd);
  for (int i = 0; i < T; ++i) {
    float* row = dqkv + (b * T + i) * Q;
    std::fill(row + koff, row + koff + hd, 0.0f);
    std::fill(row + voff, row + voff + hd, 0.0f);
  }
  const int64_t kv0 = (b * sh.KV + g) * T * hd;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i0 = 0; i0 < T; i0 += kT) {
      const int nr = std::min(kT, T - i0);
      load_f32(a.q, sh.mm, ((b * sh.H + h) * T + i0) * hd, nr * hd, t.q);
      for (int r = 0; r < nr; ++r) {
        const int64_t row = b * T + i0 + r;
        const int64_t at = row * sh.D + static_cast<int64_t>(h) * hd;
        std::memcpy(t.dO + r * hd, dout + at, sizeof(float) * hd);
        load_f32(out, sh.mm, at, hd, t.ds);  // the output row (hd <= kT * kT)
        t.l[r] = simd::row_dot(t.dO + r * hd, t.ds, hd);
        t.m[r] = a.lse[(b * sh.H + h) * T + i0 + r];
      }
      std::fill(t.o, t.o + nr * hd, 0.0f);
      for (int j0 = 0; j0 < i0 + nr; j0 += kT) {
        const int nc = std::min(kT, i0 + nr - j0);
        const int64_t k0 = kv0 + static_cast<int64_t>(j0) * hd;
        load_transposed(a.k, sh.mm, k0, nc, hd, t.kt);
        load_transposed(a.v, sh.mm, k0, nc, hd, t.vt);
        load_f32(a.k, sh.mm, k0, nc * hd, t.kv);
        for (int r = 0; r < nr; ++r) {
          const int n = std::min(nc, i0 + r - j0 + 1);
          float* p = t.p + r * kT;
          float* ds = t.ds + r * kT;
          tile_row_dot(t.q + r * hd, t.kt, hd, sh.scale, p);
          for (int c = 0; c < kT; ++c) p[c] = simd::exp_approx(p[c] - t.m[r]);
          for (int c = n; c < kT; ++c) p[c] = 0.0f;
          tile_row_dot(t.dO + r * hd, t.vt, hd, 1.0f, ds);  // dP
          const float dr = t.l[r];
          for (int c = 0; c < kT; ++c) ds[c] = p[c] * (ds[c] - dr) * sh.scale;
          tile_row_axpy(ds, n, t.kv, hd, t.o + r * hd);  // dQ += dS K
        }
        // dK += dS^T Q, dV += P^T dO over the rows that see key j0 + c.
        for (int c = 0; c < nc; ++c) {
          float* __restrict dk = dqkv + (b * T + j0 + c) * Q + koff;
          float* __restrict dv = dqkv + (b * T + j0 + c) * Q + voff;
          for (int r = std::max(0, j0 + c - i0); r < nr; ++r) {
            const float dsv = t.ds[r * kT + c], pv = t.p[r * kT + c];
            const float* q = t.q + r * hd;
            const float* dO = t.dO + r * hd;
            for (int d = 0; d < hd; ++d) dk[d] += dsv * q[d];
            for (int d = 0; d < hd; ++d) dv[d] += pv * dO[d];
          }
        }
      }
      for (int r = 0; r < nr; ++r)
        std::memcpy(dqkv + (b * T + i0 + r) * Q + static_cast<int64_t>(h) * hd, t.o + r * hd,
                    sizeof(float) * hd);
    }
  }
}
ZS_SIMD_DISPATCH(void, backward_item,
                 (const Shape& sh, const FlashAttentionActs& a, const float* dout, const void* out,
                  int64_t b, int g, float* tiles, float* dqkv),
                 (sh, a, dout, out, b, g, tiles, dqkv))

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

int64_t FlashAttention::tiles_bytes(int hd, int threads) {
  return static_cast<int64_t>(threads) * tile_floats(hd) * static_cast<int64_t>(sizeof(float));
}

void FlashAttention::forward(const float* qkv, const FlashAttentionActs& a, float* tiles,
                             void* out) const {
  const int hd = hd_;
  const int64_t rows = static_cast<int64_t>(B_) * T_, Q = D_ + 2 * static_cast<int64_t>(KV_) * hd;
  // Split heads: q [B, H, T, hd], k and v [B, KV, T, hd] in mm.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    const float* x = qkv + r * Q;
    for (int h = 0; h < H_; ++h) store_as(x + h * hd, a.q, mm_, ((b * H_ + h) * T_ + t) * hd, hd);
    for (int g = 0; g < KV_; ++g) {
      const int64_t at = ((b * KV_ + g) * T_ + t) * hd;
      store_as(x + D_ + g * hd, a.k, mm_, at, hd);
      store_as(x + D_ + (KV_ + g) * hd, a.v, mm_, at, hd);
    }
  }
  const Shape sh{T_, H_, KV_, hd, D_, static_cast<int>(Q), 1.0f / std::sqrt(static_cast<float>(hd)),
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
  const Shape sh{T_, H_, KV_, hd, D_, static_cast<int>(Q), 1.0f / std::sqrt(static_cast<float>(hd)),
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
