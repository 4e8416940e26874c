#include "nn/attention.h"

#include <cmath>
#include <cstring>

#include "nn/kernels.h"
#include "runtime/core/dtype.h"
#include "runtime/core/error.h"

namespace zs::nn {

Attention::Attention(int B, int T, int C, int H, DType mm, MemoryTracker* tracker)
    : B_(B), T_(T), C_(C), H_(H), hd_(C / H), mm_(mm) {
  ZS_CHECK(C % H == 0, ErrorCode::kInvalidArgument, "attention: width {} not divisible by heads {}",
           C, H);
  const int64_t bh = static_cast<int64_t>(B) * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  auto g = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha) {
    GemmDesc d;
    d.batch = bh;
    d.m = m;
    d.n = n;
    d.k = k;
    d.trans_a = ta;
    d.trans_b = tb;
    d.dtype = mm;
    d.alpha = alpha;
    return Gemm(d, tracker);
  };
  qk_ = g(T, T, hd_, false, true, scale);   // S = scale Q K^T
  pv_ = g(T, hd_, T, false, false, 1.0f);   // O = P V
  dp_ = g(T, T, hd_, false, true, 1.0f);    // dP = dO V^T
  dv_ = g(T, hd_, T, true, false, 1.0f);    // dV = P^T dO
  dq_ = g(T, hd_, T, false, false, scale);  // dQ = scale dS K
  dk_ = g(T, hd_, T, true, false, scale);   // dK = scale dS^T Q
}

void Attention::forward(const float* qkv, const AttentionActs& a, const AttentionWork& w,
                        void* out) {
  const int64_t rows = static_cast<int64_t>(B_) * T_;
  const int hd = hd_;
  void* dst[3] = {a.q, a.k, a.v};
  // Split heads: qkv[b, t, s*C + h*hd + d] -> X_s[b, h, t, d].
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < H_; ++h)
        store_as(qkv + r * 3 * C_ + s * C_ + h * hd, dst[s], mm_, ((b * H_ + h) * T_ + t) * hd, hd);
  }
  qk_.run(a.q, a.k, w.s);
  const int64_t bh = static_cast<int64_t>(B_) * H_;
  causal_softmax_forward(w.s, a.p, bh, T_);
  if (mm_ != DType::kF32) store_as(a.p, a.pm, mm_, 0, bh * T_ * T_);
  pv_.run(a.pm, a.v, w.o);
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
  dp_.run(w.dom, a.v, w.s);
  dv_.run(a.pm, w.dom, w.dv);
  causal_softmax_backward(a.p, w.s, w.s, bh, T_);
  const void* ds = w.s;
  if (mm_ != DType::kF32) {
    store_as(w.s, w.dsm, mm_, 0, bh * T_ * T_);
    ds = w.dsm;
  }
  dq_.run(ds, a.k, w.dq);
  dk_.run(ds, a.q, w.dk);
  const float* src[3] = {w.dq, w.dk, w.dv};
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / T_, t = r % T_;
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < H_; ++h)
        std::memcpy(dqkv + r * 3 * C_ + s * C_ + h * hd, src[s] + ((b * H_ + h) * T_ + t) * hd,
                    sizeof(float) * hd);
  }
}

}  // namespace zs::nn
