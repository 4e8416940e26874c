#include "optim/clip.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"
#include "core/error.h"
#include "core/simd_dispatch.h"

namespace zs::optim {

namespace {

// [Note: sum of squares lanes] span_stats sums in 8 lanes: lane j takes the squares (fp64) of
// elements j, j + 8, j + 16, ... in order, and the lanes are added 0 to 7 at the end. One fixed
// order, so the same bits at every ISA level (each lane is a chain of its own: the vectorizer
// keeps it), and 8 independent chains instead of one: the sum is no longer bound by the latency
// of one fp64 add per element. n is a multiple of 8.
ZS_SIMD_BODY(void, squares_8, (const float* x, int64_t n, double* lanes)) {
  double l[8];
  for (int j = 0; j < 8; ++j) l[j] = lanes[j];
  for (int64_t i = 0; i < n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const double v = x[i + j];
      l[j] += v * v;
    }
  }
  for (int j = 0; j < 8; ++j) lanes[j] = l[j];
}
ZS_SIMD_DISPATCH(void, squares_8, (const float* x, int64_t n, double* lanes), (x, n, lanes))

// m elements whose first has an index that is a multiple of 8 into the lanes.
void add_squares(const float* x, int64_t m, double* lanes) {
  const int64_t body = m / 8 * 8;
  squares_8(x, body, lanes);
  for (int64_t i = body; i < m; ++i) {
    const double v = x[i];
    lanes[i % 8] += v * v;
  }
}

}  // namespace

SpanStats span_stats(const void* data, DType dtype, int64_t n) {
  double lanes[8] = {};
  if (dtype == DType::kF32) {
    add_squares(static_cast<const float*>(data), n, lanes);
  } else {
    constexpr int64_t kPiece = 4096;  // a multiple of 8: each piece starts on lane 0
    float buf[kPiece];
    for (int64_t lo = 0; lo < n; lo += kPiece) {
      const int64_t m = std::min(kPiece, n - lo);
      for (int64_t i = 0; i < m; ++i)
        buf[i] = load_as_fp32(data, dtype, static_cast<size_t>(lo + i));
      add_squares(buf, m, lanes);
    }
  }
  double acc = 0.0;
  for (double l : lanes) acc += l;
  SpanStats s;
  s.sum_squares = acc;
  s.finite = std::isfinite(acc);
  return s;
}

namespace {

// [Note: dispatched kernels] Whether any of n elements has an exponent of all ones: a bit test
// OR-ed over the span, no branch, so it vectorizes at every level (the answer is the same at each).
ZS_SIMD_BODY(bool, any_all_ones_32, (const uint32_t* x, int64_t n)) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (x[i] & 0x7f800000u) == 0x7f800000u;
  return bad != 0;
}
ZS_SIMD_DISPATCH(bool, any_all_ones_32, (const uint32_t* x, int64_t n), (x, n))

ZS_SIMD_BODY(bool, any_all_ones_16, (const uint16_t* x, int64_t n, uint16_t e)) {
  uint16_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<uint16_t>((x[i] & e) == e);
  return bad != 0;
}
ZS_SIMD_DISPATCH(bool, any_all_ones_16, (const uint16_t* x, int64_t n, uint16_t e), (x, n, e))

// Blocks of this many elements: a bad one is then found element by element in its block.
constexpr int64_t kFiniteBlock = 16384;

template <typename Bits, typename Any>
int64_t first_all_ones(const Bits* x, int64_t n, Bits e, Any any) {
  for (int64_t lo = 0; lo < n; lo += kFiniteBlock) {
    const int64_t len = std::min(kFiniteBlock, n - lo);
    if (!any(x + lo, len)) continue;
    for (int64_t i = lo; i < lo + len; ++i) {
      if ((x[i] & e) == e) return i;
    }
  }
  return -1;
}

}  // namespace

int64_t first_nonfinite(const void* data, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return first_all_ones(static_cast<const uint32_t*>(data), n, 0x7f800000u,
                            [](const uint32_t* x, int64_t k) { return any_all_ones_32(x, k); });
    case DType::kBF16:
    case DType::kF16: {
      const uint16_t e = dtype == DType::kBF16 ? 0x7f80 : 0x7c00;
      return first_all_ones(static_cast<const uint16_t*>(data), n, e,
                            [e](const uint16_t* x, int64_t k) { return any_all_ones_16(x, k, e); });
    }
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
