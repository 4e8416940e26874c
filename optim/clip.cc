#include "optim/clip.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"
#include "core/error.h"

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

namespace {

// Elements of one block: whether any is bad is found without branches, then the block's first bad
// element (if any) element by element.
constexpr int64_t kFiniteBlock = 1024;

template <typename Bits, Bits kExponent>
int64_t first_all_ones_exponent(const Bits* x, int64_t n) {
  for (int64_t lo = 0; lo < n; lo += kFiniteBlock) {
    const int64_t hi = std::min(n, lo + kFiniteBlock);
    Bits bad = 0;
    for (int64_t i = lo; i < hi; ++i) bad |= static_cast<Bits>((x[i] & kExponent) == kExponent);
    if (bad == 0) continue;
    for (int64_t i = lo; i < hi; ++i) {
      if ((x[i] & kExponent) == kExponent) return i;
    }
  }
  return -1;
}

}  // namespace

int64_t first_nonfinite(const void* data, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return first_all_ones_exponent<uint32_t, 0x7f800000u>(static_cast<const uint32_t*>(data), n);
    case DType::kBF16:
      return first_all_ones_exponent<uint16_t, 0x7f80u>(static_cast<const uint16_t*>(data), n);
    case DType::kF16:
      return first_all_ones_exponent<uint16_t, 0x7c00u>(static_cast<const uint16_t*>(data), n);
    default:
      fail(ErrorCode::kInvalidArgument, "first_nonfinite: dtype {} (fp32, bf16 or fp16 expected)",
           dtype_name(dtype));
  }
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace zs::optim
