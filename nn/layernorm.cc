// Layer normalisation over the last dimension, forward and backward.
#include <cmath>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
ZS_SIMD_BODY(void, ln_row,
             (const float* x, const float* w, const float* b, int C, float eps, float* y,
              float* mean_out, float* rstd_out)) {
  const float mean = simd::row_sum(x, C) / static_cast<float>(C);
  alignas(64) float d[kMaxRow];
  for (int c = 0; c < C; ++c) d[c] = x[c] - mean;
  const float var = simd::row_dot(d, d, C) / static_cast<float>(C);
  const float rstd = 1.0f / std::sqrt(var + eps);
  for (int c = 0; c < C; ++c) y[c] = d[c] * rstd * w[c] + b[c];
  *mean_out = mean;
  *rstd_out = rstd;
}
ZS_SIMD_DISPATCH(void, ln_row,
                 (const float* x, const float* w, const float* b, int C, float eps, float* y,
                  float* mean_out, float* rstd_out),
                 (x, w, b, C, eps, y, mean_out, rstd_out))

// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w.
ZS_SIMD_BODY(void, ln_row_grad,
             (const float* x, const float* w, float mean, float rstd, const float* dy, int C,
              float* dx)) {
  alignas(64) float xhat[kMaxRow];
  alignas(64) float dxhat[kMaxRow];
  for (int c = 0; c < C; ++c) {
    xhat[c] = (x[c] - mean) * rstd;
    dxhat[c] = dy[c] * w[c];
  }
  const float m1 = simd::row_sum(dxhat, C) / static_cast<float>(C);
  const float m2 = simd::row_dot(dxhat, xhat, C) / static_cast<float>(C);
  for (int c = 0; c < C; ++c) dx[c] += rstd * (dxhat[c] - m1 - xhat[c] * m2);
}
ZS_SIMD_DISPATCH(void, ln_row_grad,
                 (const float* x, const float* w, float mean, float rstd, const float* dy, int C,
                  float* dx),
                 (x, w, mean, rstd, dy, C, dx))

// dw[j0..j1) += sum_i dy * xhat, db += sum_i dy, columns split across threads.
ZS_SIMD_BODY(void, ln_param_grad,
             (const float* x, const float* mean, const float* rstd, const float* dy, int64_t M,
              int C, int j0, int j1, float* dw, float* db)) {
  float aw[64], ab[64];
  const int n = j1 - j0;
  for (int j = 0; j < n; ++j) aw[j] = ab[j] = 0.0f;
  for (int64_t i = 0; i < M; ++i) {
    const float* xr = x + i * C + j0;
    const float* dr = dy + i * C + j0;
    const float m = mean[i], r = rstd[i];
    for (int j = 0; j < n; ++j) {
      aw[j] += dr[j] * ((xr[j] - m) * r);
      ab[j] += dr[j];
    }
  }
  if (dw != nullptr)
    for (int j = 0; j < n; ++j) dw[j0 + j] += aw[j];
  if (db != nullptr)
    for (int j = 0; j < n; ++j) db[j0 + j] += ab[j];
}
ZS_SIMD_DISPATCH(void, ln_param_grad,
                 (const float* x, const float* mean, const float* rstd, const float* dy, int64_t M,
                  int C, int j0, int j1, float* dw, float* db),
                 (x, mean, rstd, dy, M, C, j0, j1, dw, db))
}  // namespace

void layernorm_forward(const float* x, const float* w, const float* b, int64_t M, int C, void* out,
                       DType dt, float* mean, float* rstd, float eps) {
  ZS_ASSERT(C <= kMaxRow);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    if (dt == DType::kF32) {
      ln_row(x + i * C, w, b, C, eps, static_cast<float*>(out) + i * C, mean + i, rstd + i);
    } else {
      alignas(64) float y[kMaxRow];
      ln_row(x + i * C, w, b, C, eps, y, mean + i, rstd + i);
      store_as(y, out, dt, i * C, C);
    }
  }
}

void layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                        const float* dy, int64_t M, int C, float* dx, float* dw, float* db) {
  ZS_ASSERT(C <= kMaxRow);
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < M; ++i)
      ln_row_grad(x + i * C, w, mean[i], rstd[i], dy + i * C, C, dx + i * C);
    const int blocks = dw != nullptr || db != nullptr ? (C + 63) / 64 : 0;
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk)
      ln_param_grad(x, mean, rstd, dy, M, C, blk * 64, std::min(C, blk * 64 + 64), dw, db);
  }
}

}  // namespace zs::nn
