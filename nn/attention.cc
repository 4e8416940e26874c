#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

std::array<Attention::SplitDescs, 6> Attention::gemm_descs(int B, int T, int C, int H, DType mm) {
  const int64_t bh = static_cast<int64_t>(B) * H;
  const int64_t D = C / H, h = T >= 16 ? T / 2 : 0, tt = static_cast<int64_t>(T) * T, td = T * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // One GEMM over the per-head matrices; sq = T*T or T*D batch strides, ld = row strides.
  auto g = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha, int64_t lda,
               int64_t sa, int64_t ldb, int64_t sb, int64_t ldc, int64_t sc) {
    GemmDesc d;
    d.batch = bh;
    d.m = m;
    d.n = n;
    d.k = k;
    d.trans_a = ta;
    d.trans_b = tb;
    d.dtype = mm;
    d.alpha = alpha;
    d.lda = lda;
    d.stride_a = sa;
    d.ldb = ldb;
    d.stride_b = sb;
    d.ldc = ldc;
    d.stride_c = sc;
    return d;
  };
  auto both = [&](auto make) {
    SplitDescs s;
    s.has_top = h > 0;
    if (s.has_top) s.top = make(true);
    s.bottom = make(false);
    return s;
  };
  // S = scale Q K^T: rows [0,h) x keys [0,h); rows [h,T) x all keys.
  auto scores = [&](float alpha) {
    return [&, alpha](bool top) {
      return top ? g(h, h, D, false, true, alpha, D, td, D, td, T, tt)
                 : g(T - h, T, D, false, true, alpha, D, td, D, td, T, tt);
    };
  };
  // O = P V: rows [0,h) use keys [0,h); rows [h,T) all keys. Same for dQ = scale dS K.
  auto rows_by_keys = [&](float alpha) {
    return [&, alpha](bool top) {
      return top ? g(h, D, h, false, false, alpha, T, tt, D, td, D, td)
                 : g(T - h, D, T, false, false, alpha, T, tt, D, td, D, td);
    };
  };
  // dV = P^T dO: keys [0,h) get all queries; keys [h,T) only queries [h,T). Same for
  // dK = scale dS^T Q.
  auto keys_by_rows = [&](float alpha) {
    return [&, alpha](bool top) {
      return top ? g(h, D, T, true, false, alpha, T, tt, D, td, D, td)
                 : g(T - h, D, T - h, true, false, alpha, T, tt, D, td, D, td);
    };
  };
  return {both(scores(scale)),      both(scores(1.0f)) /* dP = dO V^T */,
          both(rows_by_keys(1.0f)), both(rows_by_keys(scale)),
          both(keys_by_rows(1.0f)), both(keys_by_rows(scale))};
}

Attention::Attention(int B, int T, int C, int H, DType mm, MemoryTracker* tracker,
                     GemmWorkspace* ws)
    : Attention(B, T, C, H, H, mm, tracker, ws) {}

Attention::Attention(int B, int T, int C, int H, int KV, DType mm, MemoryTracker* tracker,
                     GemmWorkspace* ws)
    : B_(B), T_(T), C_(C), H_(H), KV_(KV), hd_(C / H), h_(T >= 16 ? T / 2 : 0), mm_(mm) {
  ZS_CHECK(C % H == 0, ErrorCode::kInvalidArgument, "attention: width {} not divisible by heads {}",
           C, H);
  ZS_CHECK(KV > 0 && H % KV == 0, ErrorCode::kInvalidArgument,
           "attention: heads {} not divisible by key/value heads {}", H, KV);
  const std::array<SplitDescs, 6> g = gemm_descs(B, T, C, H, mm);
  Split* splits[] = {&qk_, &dp_, &pv_, &dq_, &dv_, &dk_};
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i].has_top) splits[i]->top = Gemm(g[i].top, tracker, ws);
    splits[i]->bottom = Gemm(g[i].bottom, tracker, ws);
  }
  if (qk_.bottom.widens()) {
    if (ws == nullptr) ws = (own_ws_ = std::make_unique<GemmWorkspace>(tracker)).get();
    ws->reserve(pair_workspace_need(B, T, C, H));
    ws_ = ws;
  }
}

int64_t Attention::scratchpad_bytes() const {
  size_t b = 0;
  for (const Split* s : {&qk_, &pv_, &dp_, &dv_, &dq_, &dk_})
    b += s->top.scratchpad_bytes() + s->bottom.scratchpad_bytes();
  return static_cast<int64_t>(b);
}

namespace {
size_t aligned_floats(int64_t n) { return static_cast<size_t>((4 * n + 63) / 64 * 64); }
}  // namespace

// The larger span of a pair lies in a [B, H, T, T] or a [B, H, T, hd] tensor, the smaller one
// in a [B, H, T, hd] one (or both in such).
size_t Attention::pair_workspace_need(int B, int T, int C, int H) {
  const int64_t tt = static_cast<int64_t>(B) * H * T * T, td = static_cast<int64_t>(B) * T * C;
  return aligned_floats(std::max(tt, td)) + aligned_floats(td);
}

int64_t Attention::qkv_col(int s, int h) const {
  if (s == 0) return static_cast<int64_t>(h) * hd_;
  const int64_t g = h / (H_ / KV_);  // repeat_kv: query head h reads key/value head g
  return C_ + (s - 1) * static_cast<int64_t>(KV_) * hd_ + g * hd_;
}

void Attention::run(Split& g, const void* a, int64_t a_top, int64_t a_bot, const void* b,
                    int64_t b_top, int64_t b_bot, float* c, int64_t c_top, int64_t c_bot) {
  // Offsets are in elements of the operands' dtype (A, B in mm; C fp32).
  const size_t e = dtype_size(mm_);
  auto at = [e](const void* p, int64_t off) { return static_cast<const char*>(p) + off * e; };
  if (ws_ != nullptr) {
    // [Note: GEMM paths] widened: each operand's span over both halves, once; the larger span
    // first in the workspace (pair_workspace_need).
    const GemmDesc& bd = g.bottom.desc();
    int64_t alo = a_bot, ahi = a_bot + bd.a_extent(), blo = b_bot, bhi = b_bot + bd.b_extent();
    if (h_ > 0) {
      const GemmDesc& td = g.top.desc();
      alo = std::min(alo, a_top);
      ahi = std::max(ahi, a_top + td.a_extent());
      blo = std::min(blo, b_top);
      bhi = std::max(bhi, b_top + td.b_extent());
    }
    auto* w = static_cast<char*>(ws_->data());
    const int64_t tt = static_cast<int64_t>(B_) * H_ * T_ * T_,
                  td = static_cast<int64_t>(B_) * T_ * C_;
    float* big = reinterpret_cast<float*>(w);
    float* small = reinterpret_cast<float*>(w + aligned_floats(std::max(tt, td)));
    const bool a_first = ahi - alo >= bhi - blo;
    float* a32 = a_first ? big : small;  // holds a[alo, ahi)
    float* b32 = a_first ? small : big;  // holds b[blo, bhi)
    widen_bf16(at(a, alo), a32, ahi - alo);
    widen_bf16(at(b, blo), b32, bhi - blo);
    if (h_ > 0) g.top.run_widened(a32 + (a_top - alo), b32 + (b_top - blo), c + c_top);
    g.bottom.run_widened(a32 + (a_bot - alo), b32 + (b_bot - blo), c + c_bot);
    return;
  }
  if (h_ > 0) g.top.run(at(a, a_top), at(b, b_top), c + c_top);
  g.bottom.run(at(a, a_bot), at(b, b_bot), c + c_bot);
}

void Attention::forward(const float* qkv, const AttentionActs& a, const AttentionWork& w,
                        void* out) {
  const int64_t rows = static_cast<int64_t>(B_) * T_;
  const int hd = hd_;
  void* dst[3] = {a.q, a.k, a.v};
  const int64_t width = qkv_width();
  // Split heads: qkv[b, t, qkv_col(s, h) + d] -> X_s[b, h, t, d].
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < H_; ++h)
        store_as(qkv + r * width + qkv_col(s, h), dst[s], mm_, ((b * H_ + h) * T_ + t) * hd, hd);
  }
  const int64_t h = h_, D = hd_, T = T_;
  run(qk_, a.q, 0, h * D, a.k, 0, 0, w.s, 0, h * T);
  const int64_t bh = static_cast<int64_t>(B_) * H_;
  causal_softmax_forward(w.s, a.p, bh, T_);
  if (mm_ != DType::kF32) store_as(a.p, a.pm, mm_, 0, bh * T_ * T_);
  run(pv_, a.pm, 0, h * T, a.v, 0, 0, w.o, 0, h * D);
  // Merge heads: O[b, h, t, d] -> out[b, t, h*hd + d].
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int h = 0; h < H_; ++h)
      store_as(w.o + ((b * H_ + h) * T_ + t) * hd, out, mm_, r * C_ + h * hd, hd);
  }
}

void Attention::backward(const float* dout, const AttentionActs& a, const AttentionWork& w,
                         float* dqkv) {
  const int64_t rows = static_cast<int64_t>(B_) * T_;
  const int64_t bh = static_cast<int64_t>(B_) * H_;
  const int hd = hd_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int h = 0; h < H_; ++h)
      store_as(dout + r * C_ + h * hd, w.dom, mm_, ((b * H_ + h) * T_ + t) * hd, hd);
  }
  const int64_t h = h_, D = hd_, T = T_;
  run(dp_, w.dom, 0, h * D, a.v, 0, 0, w.s, 0, h * T);
  run(dv_, a.pm, 0, h * T + h, w.dom, 0, h * D, w.dv, 0, h * D);
  causal_softmax_backward(a.p, w.s, w.s, bh, T_);
  const void* ds = w.s;
  if (mm_ != DType::kF32) {
    store_as(w.s, w.dsm, mm_, 0, bh * T_ * T_);
    ds = w.dsm;
  }
  run(dq_, ds, 0, h * T, a.k, 0, 0, w.dq, 0, h * D);
  run(dk_, ds, 0, h * T + h, a.q, 0, h * D, w.dk, 0, h * D);
  merge_grads(w, dqkv);
}

// dqkv[b, t, qkv_col(s, h) + d] = dX_s[b, h, t, d]; for k and v, the first head of a group is
// copied and the others added in head order (one head per group: a copy, MHA's bits).
void Attention::merge_grads(const AttentionWork& w, float* dqkv) const {
  const int64_t rows = static_cast<int64_t>(B_) * T_, width = qkv_width();
  const int hd = hd_;
  const float* src[3] = {w.dq, w.dk, w.dv};
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < H_; ++h) {
        float* dst = dqkv + r * width + qkv_col(s, h);
        const float* g = src[s] + ((b * H_ + h) * T_ + t) * hd;
        if (s == 0 || h % (H_ / KV_) == 0) {
          std::memcpy(dst, g, sizeof(float) * hd);
        } else {
          for (int d = 0; d < hd; ++d) dst[d] += g[d];
        }
      }
  }
}

}  // namespace zs::nn
