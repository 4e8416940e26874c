#include "optim/clip.h"

#include <cmath>

#include "core/convert.h"

namespace zs::optim {

SpanStats span_stats(const void* data, DType dtype, int64_t n) {
  SpanStats s;
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = load_as_fp32(data, dtype, static_cast<size_t>(i));
    acc += x * x;
  }
  s.sum_squares = acc;
  s.finite = std::isfinite(acc);
  return s;
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace zs::optim
