// Root-mean-square normalisation over the last dimension (Llama's RMSNorm), forward and backward,
// and its per-head form on q and k (Qwen3's q_norm / k_norm).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
ZS_SIMD_BODY(void, rms_row,
             (const float* x, const float* w, int C, float eps, float* y, float* rstd_out)) {
  const float ms = simd::row_dot(x, x, C) / static_cast<float>(C);
  const float rstd = 1.0f / std::sqrt(ms + eps);
  for (int c = 0; c < C; ++c) y[c] = x[c] * rstd * w[c];
  *rstd_out = rstd;
}
ZS_SIMD_DISPATCH(void, rms_row,
                 (const float* x, const float* w, int C, float eps, float* y, float* rstd_out),
                 (x, w, C, eps, y, rstd_out))

// dx += rstd * (dxhat - xhat * mean(dxhat * xhat)), xhat = x * rstd, dxhat = dy * w.
ZS_SIMD_BODY(void, rms_row_grad,
             (const float* x, const float* w, float rstd, const float* dy, int C, float* dx)) {
  alignas(64) float xhat[kMaxRow];
  alignas(64) float dxhat[kMaxRow];
  for (int c = 0; c < C; ++c) {
    xhat[c] = x[c] * rstd;
    dxhat[c] = dy[c] * w[c];
  }
  const float m = simd::row_dot(dxhat, xhat, C) / static_cast<float>(C);
  for (int c = 0; c < C; ++c) dx[c] += rstd * (dxhat[c] - xhat[c] * m);
}
ZS_SIMD_DISPATCH(void, rms_row_grad,
                 (const float* x, const float* w, float rstd, const float* dy, int C, float* dx),
                 (x, w, rstd, dy, C, dx))

// dw[j0..j1) += sum_i dy * x * rstd, columns split across threads (fixed row order).
ZS_SIMD_BODY(void, rms_param_grad,
             (const float* x, const float* rstd, const float* dy, int64_t M, int C, int j0, int j1,
              float* dw)) {
  float aw[64];
  const int n = j1 - j0;
  for (int j = 0; j < n; ++j) aw[j] = 0.0f;
  for (int64_t i = 0; i < M; ++i) {
    const float* xr = x + i * C + j0;
    const float* dr = dy + i * C + j0;
    const float r = rstd[i];
    for (int j = 0; j < n; ++j) aw[j] += dr[j] * (xr[j] * r);
  }
  for (int j = 0; j < n; ++j) dw[j0 + j] += aw[j];
}
ZS_SIMD_DISPATCH(void, rms_param_grad,
                 (const float* x, const float* rstd, const float* dy, int64_t M, int C, int j0,
                  int j1, float* dw),
                 (x, rstd, dy, M, C, j0, j1, dw))

// dw[j0..j1) += sum over rows i and heads h of dy[i, h] * v[i, h] * rstd[i, h], in (i, h) order;
// dy rows ld apart, v (saved) and rstd contiguous.
ZS_SIMD_BODY(void, rms_heads_param_grad,
             (const float* dy, int64_t ld, const float* v, const float* rstd, int64_t rows,
              int heads, int hd, int j0, int j1, float* dw)) {
  float aw[64];
  const int n = j1 - j0;
  for (int j = 0; j < n; ++j) aw[j] = 0.0f;
  for (int64_t i = 0; i < rows; ++i)
    for (int h = 0; h < heads; ++h) {
      const float* dr = dy + i * ld + static_cast<int64_t>(h) * hd + j0;
      const float* vr = v + (i * heads + h) * hd + j0;
      const float r = rstd[i * heads + h];
      for (int j = 0; j < n; ++j) aw[j] += dr[j] * (vr[j] * r);
    }
  for (int j = 0; j < n; ++j) dw[j0 + j] += aw[j];
}
ZS_SIMD_DISPATCH(void, rms_heads_param_grad,
                 (const float* dy, int64_t ld, const float* v, const float* rstd, int64_t rows,
                  int heads, int hd, int j0, int j1, float* dw),
                 (dy, ld, v, rstd, rows, heads, hd, j0, j1, dw))
}  // namespace

void rmsnorm_forward(const float* x, const float* w, int64_t M, int C, float eps, void* out,
                     DType dt, float* rstd) {
  ZS_ASSERT(C <= kMaxRow);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    if (dt == DType::kF32) {
      rms_row(x + i * C, w, C, eps, static_cast<float*>(out) + i * C, rstd + i);
    } else {
      alignas(64) float y[kMaxRow];
      rms_row(x + i * C, w, C, eps, y, rstd + i);
      store_as(y, out, dt, i * C, C);
    }
  }
}

void rmsnorm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t M,
                      int C, float* dx, float* dw) {
  ZS_ASSERT(C <= kMaxRow);
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < M; ++i) rms_row_grad(x + i * C, w, rstd[i], dy + i * C, C, dx + i * C);
    const int blocks = dw != nullptr ? (C + 63) / 64 : 0;
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk)
      rms_param_grad(x, rstd, dy, M, C, blk * 64, std::min(C, blk * 64 + 64), dw);
  }
}

void rmsnorm_heads_forward(float* x, int64_t rows, int heads, int hd, int64_t ld, const float* w,
                           float eps, float* saved, float* rstd) {
  ZS_ASSERT(hd <= kMaxRow);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i)
    for (int h = 0; h < heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * hd;
      float* keep = saved + (i * heads + h) * hd;
      std::copy(v, v + hd, keep);
      rms_row(keep, w, hd, eps, v, rstd + i * heads + h);
    }
}

void rmsnorm_heads_backward(float* dx, int64_t rows, int heads, int hd, int64_t ld, const float* w,
                            const float* saved, const float* rstd, float* dw) {
  ZS_ASSERT(hd <= kMaxRow);
#pragma omp parallel
  {
    // dw first, from dy, which the rows below overwrite with dx.
    const int blocks = dw != nullptr ? (hd + 63) / 64 : 0;
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk)
      rms_heads_param_grad(dx, ld, saved, rstd, rows, heads, hd, blk * 64,
                           std::min(hd, blk * 64 + 64), dw);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      alignas(64) float dy[kMaxRow];
      for (int h = 0; h < heads; ++h) {
        float* d = dx + i * ld + static_cast<int64_t>(h) * hd;
        std::copy(d, d + hd, dy);
        std::fill(d, d + hd, 0.0f);
        const int64_t k = i * heads + h;
        rms_row_grad(saved + k * hd, w, rstd[k], dy, hd, d);
      }
    }
  }
}

}  // namespace zs::nn
