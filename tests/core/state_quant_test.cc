// The 8-bit optimizer-state code books (core/state_quant.h) and their vector block kernels
// (core/state_quant_kernels.h): the books' values, exact codes and ties, the fast encoder against
// the definition, the round-trip bound, adversarial blocks, every level against the definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/state_quant.h"
#include "core/state_quant_kernels.h"

namespace zs {
namespace {

struct Book {
  StateCode code;
  bool is_signed;
};
const Book kBooks[] = {{StateCode::kDynamic, true}, {StateCode::kDynamic, false},
                       {StateCode::kLinear, true},  {StateCode::kLinear, false},
                       {StateCode::kFloat8, true},  {StateCode::kFloat8, false}};

// The largest magnitude an encoder produces: 1 (float8's indices above 1.0 are never produced).
int top_index(const StateCodeBook& book) {
  if (book.code != StateCode::kFloat8) return book.num_mag - 1;
  return book.is_signed ? 120 : 248;
}

// The code the definition gives to the midpoint-side value f of magnitude k: k, except that an
// unsigned book never gives code 0 to a positive value.
int expected_code(const StateCodeBook& book, int k, float f) {
  return (!book.is_signed && k == 0 && f > 0.0f) ? 1 : k;
}

std::string book_name(const Book& b) {
  return std::string(state_code_name(b.code)) + (b.is_signed ? " signed" : " unsigned");
}

double exact_mid(const StateCodeBook& book, int k) {
  return (static_cast<double>(book.mag[k]) + book.mag[k + 1]) / 2.0;
}

TEST(StateQuant, BooksHaveTheDocumentedValues) {
  const auto& ds = state_code_book(StateCode::kDynamic, true);
  const auto& du = state_code_book(StateCode::kDynamic, false);
  const auto& ls = state_code_book(StateCode::kLinear, true);
  const auto& lu = state_code_book(StateCode::kLinear, false);
  EXPECT_EQ(ds.num_mag, 128);
  EXPECT_EQ(du.num_mag, 256);
  EXPECT_EQ(ds.mag[1], 1e-6f);  // decade e = 0, k = 1: 1e-6 * (0.1 + 0.9)
  EXPECT_EQ(ds.mag[2], static_cast<float>(1e-5 * (0.1 + 0.9 / 2)));
  EXPECT_EQ(du.mag[1], 1e-7f);
  EXPECT_EQ(du.mag[2], static_cast<float>(1e-6 * (0.1 + 0.9 / 2)));
  EXPECT_EQ(ls.mag[64], static_cast<float>(64.0 / 127));
  EXPECT_EQ(lu.mag[200], static_cast<float>(200.0 / 255));
  for (const Book& b : kBooks) {
    const auto& book = state_code_book(b.code, b.is_signed);
    SCOPED_TRACE(book_name(b));
    EXPECT_EQ(book.mag[0], 0.0f);
    EXPECT_EQ(book.mag[top_index(book)], 1.0f);
    for (int k = 0; k + 1 < book.num_mag; ++k) ASSERT_LT(book.mag[k], book.mag[k + 1]);
    for (int c = 0; c < 256; ++c) {
      const int j = b.is_signed ? (c & 0x7f) : c;
      const float want = (b.is_signed && c > 0x80) ? -book.mag[j] : book.mag[j];
      ASSERT_EQ(std::bit_cast<uint32_t>(book.value[c]), std::bit_cast<uint32_t>(want)) << c;
    }
  }
}

TEST(StateQuant, ExactCodesAndTies) {
  const auto& ds = state_code_book(StateCode::kDynamic, true);
  const auto& du = state_code_book(StateCode::kDynamic, false);
  EXPECT_EQ(encode_state_value(ds, 1.0f), 127);
  EXPECT_EQ(encode_state_value(ds, -1.0f), 0xff);
  EXPECT_EQ(encode_state_value(ds, 0.0f), 0);
  EXPECT_EQ(encode_state_value(ds, -0.0f), 0);  // never 0x80
  EXPECT_EQ(encode_state_value(ds, -1e-9f), 0);
  EXPECT_EQ(encode_state_value(ds, -1e-6f), 0x81);
  EXPECT_EQ(encode_state_value(du, 1.0f), 255);
  EXPECT_EQ(encode_state_value(du, -0.25f), encode_state_value(du, 0.25f));  // |x|
  EXPECT_EQ(encode_state_value(du, 1e-7f), 1);
  // Ties: where the exact midpoint is a float, it goes to the smaller magnitude and the next
  // float up to the larger one.
  int ties = 0;
  for (const Book& b : kBooks) {
    const auto& book = state_code_book(b.code, b.is_signed);
    for (int k = 0; k + 1 < book.num_mag; ++k) {
      const double mid = exact_mid(book, k);
      const float f = static_cast<float>(mid);
      const float up = std::nextafter(f, 2.0f), down = std::nextafter(f, -1.0f);
      if (static_cast<double>(f) == mid) {
        ++ties;
        ASSERT_EQ(encode_state_value(book, f), expected_code(book, k, f))
            << book_name(b) << " k=" << k;
        if (b.is_signed) {
          ASSERT_EQ(encode_state_value(book, -f), k == 0 ? 0 : (0x80 | k));
        }
      }
      ASSERT_EQ(encode_state_value(book, f > mid ? f : up), k + 1) << book_name(b) << " k=" << k;
      const float below = f <= mid ? f : down;
      ASSERT_EQ(encode_state_value(book, below), expected_code(book, k, below))
          << book_name(b) << " k=" << k;
    }
  }
  EXPECT_GT(ties, 50);  // the tie rule is exercised, not vacuous
}

// r values that probe every decision of the fast encoder: a few ulps around each midpoint and each
// bucket boundary, subnormals, and random bit patterns in [0, 1], with both signs.
std::vector<float> probe_values(const StateCodeBook& book) {
  std::vector<float> rs = {0.0f, 1.0f, std::numeric_limits<float>::denorm_min(), 1e-40f, 1e-30f};
  auto around = [&](float f) {
    for (int d = -4; d <= 4; ++d) {
      const uint32_t u = std::bit_cast<uint32_t>(f) + static_cast<uint32_t>(d);
      const float g = std::bit_cast<float>(u);
      if (g >= 0.0f && g <= 1.0f) rs.push_back(g);
    }
  };
  for (int k = 0; k + 1 < book.num_mag; ++k) around(book.mid_down[k]);
  for (uint32_t b = StateCodeBook::kBucketLo; b <= StateCodeBook::kBucketHi; ++b) {
    around(std::bit_cast<float>(b << 16));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 300000; ++i)
    rs.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng() % 0x3f800001u)));
  const size_t n = rs.size();
  for (size_t i = 0; i < n; ++i) rs.push_back(-rs[i]);
  return rs;
}

TEST(StateQuant, FastEncoderEqualsDefinition) {
  for (const Book& b : kBooks) {
    const auto& book = state_code_book(b.code, b.is_signed);
    for (float r : probe_values(book)) {
      ASSERT_EQ(encode_state_value_fast(book, r), encode_state_value(book, r))
          << book_name(b) << " r=" << r << " bits=" << std::bit_cast<uint32_t>(r);
    }
  }
}

TEST(StateQuant, EveryLevelEncodesTheProbesLikeTheDefinition) {
  // With scale 1 the division is exact, so each level sees the probes themselves (ties included).
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!simd_level_supported(level)) continue;
    for (const Book& b : kBooks) {
      const auto& book = state_code_book(b.code, b.is_signed);
      const std::vector<float> rs = probe_values(book);
      std::vector<uint8_t> got(rs.size());
      encode_state_block(level, rs.data(), 1.0f, static_cast<int64_t>(rs.size()), book, got.data());
      for (size_t i = 0; i < rs.size(); ++i) {
        ASSERT_EQ(got[i], encode_state_value(book, rs[i]))
            << simd_level_name(level) << " " << book_name(b) << " r=" << rs[i];
      }
    }
  }
}

// The largest half gap from magnitude j to its neighbours.
double half_gap(const StateCodeBook& book, int j) {
  double g = 0;
  if (j > 0) g = std::max(g, (static_cast<double>(book.mag[j]) - book.mag[j - 1]) / 2);
  if (j + 1 < book.num_mag)
    g = std::max(g, (static_cast<double>(book.mag[j + 1]) - book.mag[j]) / 2);
  return g;
}

// Blocks of wide magnitude ranges: within a block magnitudes span 1e-12 .. 1 times a block scale
// drawn over 1e-30 .. 1e30.
std::vector<float> wide_blocks(int64_t n, int64_t block, uint32_t seed, bool non_negative) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ex(-12.0f, 0.0f), bex(-30.0f, 30.0f);
  std::vector<float> x(n);
  float base = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % block == 0) base = std::pow(10.0f, bex(rng));
    const float mag = base * std::pow(10.0f, ex(rng));
    x[i] = (non_negative || (rng() & 1)) ? mag : -mag;
  }
  return x;
}

TEST(StateQuant, RoundTripWithinHalfAGap) {
  const int64_t block = 256, n = 256 * 40 + 77;  // a short last block
  for (const Book& b : kBooks) {
    const auto& book = state_code_book(b.code, b.is_signed);
    const std::vector<float> x = wide_blocks(n, block, 3, !b.is_signed);
    std::vector<uint8_t> codes(n);
    std::vector<float> scales(state_num_blocks(n, block)), y(n);
    quantize_state_blockwise(x.data(), n, block, book, codes.data(), scales.data());
    dequantize_state_blockwise(codes.data(), scales.data(), n, block, book, y.data());
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = scales[i / block];
      const int j = b.is_signed ? (codes[i] & 0x7f) : codes[i];
      const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
      // A positive v below half the smallest magnitude takes that magnitude (code 1).
      const double gap = (!b.is_signed && j == 1) ? book.mag[1] : half_gap(book, j);
      const double bound = (gap + std::ldexp(1.0, -22)) * a;
      ASSERT_LE(err, bound) << book_name(b) << " i=" << i << " x=" << x[i] << " y=" << y[i];
      worst = std::max(worst, err / a);
    }
    std::printf("%s: worst |x - x'| / absmax = %.3g\n", book_name(b).c_str(), worst);
  }
}

TEST(StateQuant, AdversarialBlocks) {
  const auto& book = state_code_book(StateCode::kDynamic, true);
  const int64_t block = 64;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(64 * 5 + 3, 0.0f);  // block 0 zeros
  for (int i = 64; i < 128; ++i) x[i] = 1e-3f;
  x[100] = nan;                                                                  // block 1: NaN
  for (int i = 128; i < 192; ++i) x[i] = -1e-41f * static_cast<float>(i - 127);  // subnormals
  x[200] = -inf;                                                                 // block 3: inf
  x[256 + 5] = 3e38f;                              // block 4: one huge element, rest tiny
  for (int i = 256; i < 320; ++i) x[i] += 1e-30f;  // (below the book's range: code 0)
  x[320] = 2.0f;                                   // short last block
  x[322] = -0.5f;
  std::vector<uint8_t> codes(x.size(), 0xee);
  std::vector<float> scales(6), y(x.size());
  quantize_state_blockwise(x.data(), x.size(), block, book, codes.data(), scales.data());
  dequantize_state_blockwise(codes.data(), scales.data(), x.size(), block, book, y.data());
  EXPECT_EQ(std::bit_cast<uint32_t>(scales[0]), 0u);
  EXPECT_TRUE(std::isnan(scales[1]));
  EXPECT_EQ(scales[2], -x[191]);
  EXPECT_TRUE(std::isnan(scales[3]));
  EXPECT_EQ(scales[4], 3e38f);
  EXPECT_EQ(scales[5], 2.0f);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(codes[i], 0);
  for (int i = 64; i < 256; ++i) {
    if (i >= 128 && i < 192) continue;
    ASSERT_EQ(codes[i], 0) << i;  // non-finite blocks: code 0, value NaN
    ASSERT_TRUE(std::isnan(y[i])) << i;
  }
  EXPECT_EQ(codes[191], 0xff);  // the subnormal absmax: -1
  EXPECT_EQ(y[191], x[191]);
  EXPECT_EQ(y[256 + 5], 3e38f);
  EXPECT_EQ(codes[256], 0);
  EXPECT_EQ(codes[320], 127);
  EXPECT_EQ(codes[321], 0);
  EXPECT_NEAR(y[322], -0.5f, 0.5 * 0.9 / 64 * 2.0);
}

TEST(StateQuant, Float8BooksFollowTheirFormula) {
  const auto& fs = state_code_book(StateCode::kFloat8, true);
  const auto& fu = state_code_book(StateCode::kFloat8, false);
  EXPECT_EQ(fs.num_mag, 128);
  EXPECT_EQ(fu.num_mag, 256);
  EXPECT_EQ(fs.mag[1], 0x1p-17f);  // e = 0: f / 8 * 2^-14
  EXPECT_EQ(fs.mag[8], 0x1p-14f);  // e = 1, f = 0
  EXPECT_EQ(fs.mag[119], 0.9375f);
  EXPECT_EQ(fu.mag[1], 0x1p-33f);
  EXPECT_EQ(fu.mag[8], 0x1p-30f);
  EXPECT_EQ(fu.mag[247], 0.9375f);
  for (const StateCodeBook* book : {&fs, &fu}) {
    const Float8Format f = float8_format(book->is_signed);
    for (uint32_t q = 0; q < static_cast<uint32_t>(book->num_mag); ++q) {
      ASSERT_EQ(std::bit_cast<uint32_t>(float8_value(f, q)), std::bit_cast<uint32_t>(book->mag[q]))
          << q;
      if (static_cast<int>(q) <= top_index(*book)) {
        ASSERT_EQ(float8_index(f, std::bit_cast<uint32_t>(book->mag[q]), book->is_signed),
                  std::max(q, book->is_signed ? 0u : 1u) * (q > 0 || book->is_signed ? 1u : 0u))
            << q;
      }
    }
    // Just above 1 (r = x * (1 / A) may round up): still the top, never an index above it.
    EXPECT_EQ(float8_index(f, std::bit_cast<uint32_t>(1.0f) + 2, book->is_signed),
              static_cast<uint32_t>(top_index(*book)));
  }
}

TEST(StateQuant, PositiveVNeverDecodesToZero) {
  // A v far below its block's absmax keeps the smallest non-zero magnitude: with m non-zero, a v
  // decoded as 0 would make AdamW's step m / eps.
  for (StateCode code : {StateCode::kDynamic, StateCode::kLinear, StateCode::kFloat8}) {
    const auto& book = state_code_book(code, false);
    SCOPED_TRACE(state_code_name(code));
    std::vector<float> x(64, 1e-30f), y(64);
    x[0] = 1.0f;
    x[1] = 0.0f;
    x[2] = std::numeric_limits<float>::denorm_min();
    std::vector<uint8_t> codes(64);
    float scale = 0;
    quantize_state_blockwise(x.data(), 64, 64, book, codes.data(), &scale);
    dequantize_state_blockwise(codes.data(), &scale, 64, 64, book, y.data());
    EXPECT_EQ(codes[1], 0);
    EXPECT_EQ(y[1], 0.0f);
    for (int i = 2; i < 64; ++i) {
      ASSERT_EQ(codes[i], 1) << i;
      ASSERT_EQ(y[i], book.mag[1]) << i;
    }
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      if (!simd_level_supported(level)) continue;
      std::vector<uint8_t> got(64);
      encode_state_block(level, x.data(), scale, 64, book, got.data());
      ASSERT_EQ(got, codes) << simd_level_name(level);
    }
  }
}

TEST(StateQuant, Float8BlockWithASubnormalAbsmaxIsZero) {
  // 1 / A overflows for the smallest subnormals, so such a block is stored as zeros.
  const auto& book = state_code_book(StateCode::kFloat8, true);
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  for (int i = 0; i < 64; ++i) x[i] = (i % 2 ? -1e-40f : 3e-41f);
  std::vector<uint8_t> codes(64, 0xee);
  float scale = 0;
  quantize_state_blockwise(x.data(), 64, 64, book, codes.data(), &scale);
  EXPECT_EQ(scale, 1e-40f);
  dequantize_state_blockwise(codes.data(), &scale, 64, 64, book, y.data());
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(codes[i], 0) << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), 0u) << i;
  }
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!simd_level_supported(level)) continue;
    std::vector<uint8_t> got(64, 0xee);
    encode_state_block(level, x.data(), scale, 64, book, got.data());
    ASSERT_EQ(got, codes) << simd_level_name(level);
  }
  // The smallest normal absmax is encoded: the absmax element decodes to itself.
  x[0] = 0x1p-126f;
  quantize_state_blockwise(x.data(), 64, 64, book, codes.data(), &scale);
  EXPECT_EQ(codes[0], 120);
  dequantize_state_blockwise(codes.data(), &scale, 64, 64, book, y.data());
  EXPECT_EQ(y[0], 0x1p-126f);
}

TEST(StateQuant, CodeNamesParse) {
  for (StateCode c : {StateCode::kDynamic, StateCode::kLinear, StateCode::kFloat8}) {
    EXPECT_EQ(parse_state_code(state_code_name(c)), c);
  }
  try {
    parse_state_code("fp4");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fp4'"), std::string::npos) << e.what();
  }
}

TEST(StateQuant, BlockSizeIsChecked) {
  const auto& book = state_code_book(StateCode::kLinear, false);
  float x[128] = {};
  uint8_t c[128];
  float s[2];
  for (int64_t block : {0, -64, 100, 32}) {
    EXPECT_THROW(quantize_state_blockwise(x, 128, block, book, c, s), Error) << block;
    EXPECT_THROW(dequantize_state_blockwise(c, s, 128, block, book, x), Error) << block;
  }
  EXPECT_NO_THROW(quantize_state_blockwise(x, 128, 192, book, c, s));
  EXPECT_EQ(state_num_blocks(128, 192), 1);
  EXPECT_EQ(state_num_blocks(385, 128), 4);
}

TEST(StateQuant, EveryLevelGivesTheDefinitionsBits) {
  const int64_t block = 320, n = 320 * 7 + 100;
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!simd_level_supported(level)) continue;
    for (const Book& b : kBooks) {
      SCOPED_TRACE(std::string(simd_level_name(level)) + " " + book_name(b));
      const auto& book = state_code_book(b.code, b.is_signed);
      std::vector<float> x = wide_blocks(n, block, 11, !b.is_signed);
      x[block + 3] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t i = 2 * block; i < 3 * block; ++i) x[i] = 0.0f;
      std::vector<uint8_t> want(n), got(n);
      std::vector<float> scales(state_num_blocks(n, block));
      quantize_state_blockwise(x.data(), n, block, book, want.data(), scales.data());
      for (int64_t i = 0, k = 0; i < n; i += block, ++k) {
        const int64_t len = std::min(block, n - i);
        const float s = state_block_scale_at(level, x.data() + i, len);
        ASSERT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(scales[k])) << k;
        encode_state_block(level, x.data() + i, s, len, book, got.data() + i);
        std::vector<float> y(len), yref(len);
        decode_state_block(level, want.data() + i, s, len, book, y.data());
        dequantize_state_blockwise(want.data() + i, &scales[k], len, block, book, yref.data());
        ASSERT_EQ(0, std::memcmp(y.data(), yref.data(), 4 * len)) << k;
      }
      ASSERT_EQ(want, got);
    }
  }
}

}  // namespace
}  // namespace zs
