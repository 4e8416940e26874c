#include "nn/lm_head.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

std::vector<int64_t> LmHead::linear_rows(int64_t M, int64_t chunk) {
  if (M % chunk == 0) return {chunk};
  return {chunk, M % chunk};
}

LmHead::LmHead(int64_t M, int C, int V, int64_t chunk, DType mm, MemoryTracker* tracker,
               GemmWorkspace* ws)
    : M_(M), chunk_(chunk), C_(C), V_(V), mm_(mm) {
  ZS_CHECK(chunk >= 1 && chunk <= M, ErrorCode::kInvalidArgument,
           "lm head: chunk of {} rows is outside 1..{} (the rows)", chunk, M);
  const std::vector<int64_t> rows = linear_rows(M, chunk);
  full_ = Linear(rows[0], C, V, false, false, mm, tracker, ws);
  if (rows.size() > 1) tail_ = Linear(rows[1], C, V, false, false, mm, tracker, ws);
}

int64_t LmHead::scratchpad_bytes() const {
  return full_.scratchpad_bytes() + tail_.scratchpad_bytes();
}

void LmHead::chunk_logits(const void* x, const void* w, int64_t r0, int64_t n, float* logits) {
  const auto* xr = static_cast<const char*>(x) + r0 * C_ * static_cast<int64_t>(dtype_size(mm_));
  lin(n).forward(xr, w, nullptr, logits);
}

double LmHead::forward(const void* x, const void* w, const int32_t* targets, float* logits,
                       float* row_loss) {
  for (int64_t r0 = 0; r0 < M_; r0 += chunk_) {
    const int64_t n = std::min(chunk_, M_ - r0);
    chunk_logits(x, w, r0, n, logits);
    // The logits become probabilities in place; the last chunk's stay for backward.
    cross_entropy_rows(logits, targets + r0, n, V_, logits, row_loss + r0);
  }
  return mean_row_loss(row_loss, M_);
}

void LmHead::row_logits(const void* x, const void* w, int64_t r, float* logits, float* out) {
  ZS_CHECK(r >= 0 && r < M_, ErrorCode::kInvalidArgument, "lm head: row {} is outside 0..{}", r,
           M_ - 1);
  const int64_t r0 = r / chunk_ * chunk_;
  chunk_logits(x, w, r0, std::min(chunk_, M_ - r0), logits);
  std::memcpy(out, logits + (r - r0) * V_, sizeof(float) * V_);
}

void LmHead::backward(const void* x, const void* w, const int32_t* targets, float scale,
                      float* logits, void* dl_mm, float* row_loss, float* dx, float* dw) {
  const float k = scale / static_cast<float>(M_);  // as cross_entropy_backward's
  const int64_t e = static_cast<int64_t>(dtype_size(mm_));
  const int64_t last = (num_chunks() - 1) * chunk_;
  for (int64_t r0 = last; r0 >= 0; r0 -= chunk_) {  // the last chunk first: its probabilities
    const int64_t n = std::min(chunk_, M_ - r0);    // are in `logits` from forward()
    if (r0 != last) {
      chunk_logits(x, w, r0, n, logits);
      cross_entropy_rows(logits, targets + r0, n, V_, logits, row_loss + r0);
    }
    cross_entropy_backward_rows(logits, targets + r0, n, V_, k, logits);
    const void* dl = logits;
    if (mm_ != DType::kF32) {
      store_as(logits, dl_mm, mm_, 0, n * V_);
      dl = dl_mm;
    }
    lin(n).backward(dl, static_cast<const char*>(x) + r0 * C_ * e, w, dx + r0 * C_, dw);
  }
}

}  // namespace zs::nn
