#include "core/state_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"

namespace zs {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The magnitudes of [Note: state code books], in double, ascending, 0 first.
std::vector<double> magnitudes(StateCode code, bool is_signed) {
  const int count = is_signed ? 128 : 256;
  std::vector<double> out = {0.0};
  if (code == StateCode::kFloat8) {
    const int e_top = is_signed ? 15 : 31;
    for (int q = 1; q < count; ++q) {
      const int e = q >> 3, f = q & 7;
      out.push_back(e == 0 ? std::ldexp(f / 8.0, 1 - e_top) : std::ldexp(1.0 + f / 8.0, e - e_top));
    }
    return out;
  }
  if (code == StateCode::kLinear) {
    for (int j = 1; j < count; ++j) out.push_back(static_cast<double>(j) / (count - 1));
    return out;
  }
  if (!is_signed) out.push_back(1e-7);
  for (int e = 0; e <= 6; ++e) {
    const int k = is_signed ? (1 << e) : (2 << e);
    for (int j = 1; j <= k; ++j) out.push_back(std::pow(10.0, e - 6) * (0.1 + 0.9 * j / k));
  }
  ZS_ASSERT(static_cast<int>(out.size()) == count);
  return out;
}

// Largest float <= d.
float round_down(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) > d) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

// The exact midpoint of two floats of the books (their sum is exact in double: the magnitudes
// span under 30 binades).
double exact_mid(float a, float b) { return (static_cast<double>(a) + b) / 2.0; }

StateCodeBook build(StateCode code, bool is_signed) {
  StateCodeBook book;
  book.code = code;
  book.is_signed = is_signed;
  book.reciprocal = code == StateCode::kFloat8;
  const std::vector<double> mags = magnitudes(code, is_signed);
  book.num_mag = static_cast<int>(mags.size());
  for (int k = 0; k < book.num_mag; ++k) book.mag[k] = static_cast<float>(mags[k]);
  for (int k = 0; k + 1 < book.num_mag; ++k) {
    ZS_ASSERT(book.mag[k] < book.mag[k + 1]);
    book.mid_down[k] = round_down(exact_mid(book.mag[k], book.mag[k + 1]));
  }
  book.mid_down[book.num_mag - 1] = std::numeric_limits<float>::infinity();
  for (int c = 0; c < 256; ++c) {
    const int j = is_signed ? (c & 0x7f) : c;
    book.value[c] = (is_signed && (c & 0x80) && j != 0) ? -book.mag[j] : book.mag[j];
  }
  for (int level = 0; (1 << level) < book.num_mag; ++level) {
    for (int q = 0; q < (1 << level); ++q) {
      book.search_mid[(1 << level) - 1 + q] =
          book.mid_down[(2 * q + 1) * (book.num_mag >> (level + 1)) - 1];
    }
  }
  // Buckets: the midpoints below each bucket's low end, and at most one inside it.
  for (int b = 0; b < StateCodeBook::kBuckets; ++b) {
    const float lo = float_of((StateCodeBook::kBucketLo + b) << 16);
    const float hi = float_of((StateCodeBook::kBucketLo + b + 1) << 16);
    int below = 0, inside = 0;
    for (int k = 0; k + 1 < book.num_mag; ++k) {
      below += book.mid_down[k] < lo;
      inside += book.mid_down[k] >= lo && book.mid_down[k] < hi;
    }
    ZS_ASSERT(inside <= 1);
    book.bucket_first[b] = static_cast<uint32_t>(below);
  }
  ZS_ASSERT(book.bucket_first[0] == 0);
  return book;
}

}  // namespace

const StateCodeBook& state_code_book(StateCode code, bool is_signed) {
  static const StateCodeBook books[3][2] = {
      {build(StateCode::kDynamic, false), build(StateCode::kDynamic, true)},
      {build(StateCode::kLinear, false), build(StateCode::kLinear, true)},
      {build(StateCode::kFloat8, false), build(StateCode::kFloat8, true)}};
  return books[static_cast<int>(code)][is_signed ? 1 : 0];
}

const char* state_code_name(StateCode code) {
  switch (code) {
    case StateCode::kDynamic:
      return "dynamic";
    case StateCode::kLinear:
      return "linear";
    case StateCode::kFloat8:
      return "float8";
  }
  return "invalid";
}

StateCode parse_state_code(const char* name) {
  for (StateCode c : {StateCode::kFloat8, StateCode::kDynamic, StateCode::kLinear}) {
    if (std::strcmp(name, state_code_name(c)) == 0) return c;
  }
  fail(ErrorCode::kInvalidArgument,
       "optimizer state code book '{}' is unknown (float8, dynamic or linear expected)", name);
}

uint8_t encode_state_value(const StateCodeBook& book, float r) {
  const double a = std::fabs(static_cast<double>(r));
  // j = #{k : a > exact midpoint k}: the midpoints ascend, so binary search for the first one
  // that is >= a.
  int lo = 0, hi = book.num_mag - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (a > exact_mid(book.mag[mid], book.mag[mid + 1])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (!book.is_signed && lo == 0 && a > 0) lo = 1;  // a positive v keeps code >= 1
  const bool neg = book.is_signed && std::signbit(r) && lo != 0;
  return static_cast<uint8_t>(lo | (neg ? 0x80 : 0));
}

int64_t state_num_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

void check_state_block(int64_t block) {
  ZS_CHECK(block > 0 && block % 64 == 0, ErrorCode::kInvalidArgument,
           "state quantization: block = {} (a positive multiple of 64 expected)", block);
}

float state_block_scale(const float* x, int64_t n) {
  uint32_t amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, bits_of(x[i]) & 0x7fffffffu);
  return state_scale_from_absmax_bits(amax);
}

void quantize_state_blockwise(const float* x, int64_t n, int64_t block, const StateCodeBook& book,
                              uint8_t* codes, float* scales) {
  check_state_block(block);
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "quantize_state_blockwise: n = {} < 0", n);
  for (int64_t b = 0; b * block < n; ++b) {
    const int64_t begin = b * block, len = std::min(block, n - begin);
    const float scale = state_block_scale(x + begin, len);
    scales[b] = scale;
    if (!(scale >= state_min_scale(book))) {  // 0, NaN, or float8 below the normal range
      std::memset(codes + begin, 0, static_cast<size_t>(len));
      continue;
    }
    const float inv = 1.0f / scale;
    for (int64_t i = begin; i < begin + len; ++i) {
      codes[i] = encode_state_value(book, book.reciprocal ? x[i] * inv : x[i] / scale);
    }
  }
}

void dequantize_state_blockwise(const uint8_t* codes, const float* scales, int64_t n, int64_t block,
                                const StateCodeBook& book, float* x) {
  check_state_block(block);
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "dequantize_state_blockwise: n = {} < 0", n);
  for (int64_t i = 0; i < n; ++i) x[i] = book.value[codes[i]] * scales[i / block];
}

}  // namespace zs
