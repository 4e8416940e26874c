#include "core/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"

namespace zs {
namespace {

TEST(Quantize, UnitScaleRoundsHalfToEven) {
  EXPECT_EQ(quantize_int8_value(3.14159265f), 3);
  EXPECT_EQ(quantize_int8_value(-3.14159265f), -3);
  EXPECT_EQ(quantize_int8_value(2.5f), 2);
  EXPECT_EQ(quantize_int8_value(3.5f), 4);
  EXPECT_EQ(quantize_int8_value(-0.5f), 0);
  EXPECT_EQ(quantize_int8_value(0.49999997f), 0);  // v + 0.5 would round up to 1: must not
  EXPECT_EQ(quantize_int8_value(126.5f), 126);
  EXPECT_EQ(quantize_int8_value(126.50001f), 127);
  EXPECT_EQ(quantize_int8_value(1000.0f), 127);
  EXPECT_EQ(quantize_int8_value(-1000.0f), -127);
  EXPECT_EQ(quantize_int8_value(-std::numeric_limits<float>::infinity()), -127);
  EXPECT_EQ(quantize_int8_value(std::numeric_limits<float>::quiet_NaN()), 0);
  const float x[] = {3.14159265f, -2.71828f, 0.0f, 200.0f};
  int8_t q[4];
  quantize_int8_unit(x, 4, q);
  EXPECT_EQ(q[0], 3);
  EXPECT_EQ(q[1], -3);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 127);
}

// Random blocks over many magnitudes (and a short last block): the bound of quantize.h holds,
// each block's largest magnitude maps to +-127, nothing is -128.
TEST(Quantize, BlockwiseErrorBoundOnRandomData) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-140, 120);
  const size_t block = 64, n = 64 * 997 + 13;
  std::vector<float> x(n), back(n);
  for (size_t b = 0; b * block < n; ++b) {
    const float mag = std::ldexp(1.0f, expo(rng));
    for (size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) x[i] = normal(rng) * mag;
  }
  const size_t nb = quantize_num_blocks(n, block);
  ASSERT_EQ(nb, 998u);
  std::vector<int8_t> q(n);
  std::vector<float> scales(nb);
  quantize_int8_blockwise(x.data(), n, block, q.data(), scales.data());
  dequantize_int8_blockwise(q.data(), scales.data(), n, block, back.data());
  double worst = 0;  // max |x - x'| / scale
  for (size_t b = 0; b < nb; ++b) {
    const size_t begin = b * block, end = std::min(n, begin + block);
    float absmax = 0;
    size_t arg = begin;
    for (size_t i = begin; i < end; ++i)
      if (std::fabs(x[i]) > absmax) absmax = std::fabs(x[i]), arg = i;
    ASSERT_GT(scales[b], 0.0f);
    if (scales[b] >= std::numeric_limits<float>::min()) {
      EXPECT_EQ(std::abs(q[arg]), 127) << "block " << b;
      EXPECT_EQ(q[arg] > 0, x[arg] > 0);
    }
    for (size_t i = begin; i < end; ++i) {
      ASSERT_GE(q[i], -127);
      const double err = std::fabs(static_cast<double>(x[i]) - back[i]) / scales[b];
      worst = std::max(worst, err);
      ASSERT_LE(err, 0.5 + std::ldexp(1.0, -15)) << "block " << b << " i " << i;
    }
  }
  std::printf("max |x - dequant| / scale = %.9f\n", worst);
}

TEST(Quantize, AbsmaxMapsTo127AndZeroBlock) {
  const float x[] = {0.5f, -2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.0f, 7.0f};
  int8_t q[9];
  float s[3];
  quantize_int8_blockwise(x, 9, 4, q, s);
  EXPECT_FLOAT_EQ(s[0], 2.0f / 127.0f);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[0], 32);  // 0.5 * 127 / 2 = 31.75
  EXPECT_EQ(q[2], 64);  // 63.5 -> even
  EXPECT_EQ(s[1], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(q[8], 127);  // short last block of one element
  EXPECT_FLOAT_EQ(s[2], 7.0f / 127.0f);
  float back[9];
  dequantize_int8_blockwise(q, s, 9, 4, back);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(Quantize, TinyAndNonFiniteBlocks) {
  // absmax in the subnormal range: scale rounded up, bound still holds.
  const float tiny[] = {std::ldexp(190.0f, -149), std::ldexp(-3.0f, -149), std::ldexp(1.0f, -149)};
  int8_t q[3];
  float s;
  quantize_int8_blockwise(tiny, 3, 3, q, &s);
  float back[3];
  dequantize_int8_blockwise(q, &s, 3, 3, back);
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(tiny[i] - back[i]), s / 2) << i;
  // inf or NaN: scale NaN, q 0, dequantized NaN.
  const float bad[] = {1.0f, std::numeric_limits<float>::infinity(), 2.0f, 3.0f};
  int8_t qb[4];
  float sb[2];
  quantize_int8_blockwise(bad, 4, 2, qb, sb);
  EXPECT_TRUE(std::isnan(sb[0]));
  EXPECT_EQ(qb[0], 0);
  EXPECT_EQ(qb[1], 0);
  EXPECT_EQ(qb[3], 127);
  float bb[4];
  dequantize_int8_blockwise(qb, sb, 4, 2, bb);
  EXPECT_TRUE(std::isnan(bb[0]));
  EXPECT_FLOAT_EQ(bb[3], 3.0f);
}

TEST(Quantize, ZeroBlockSizeThrows) {
  float x = 1;
  int8_t q;
  float s;
  EXPECT_THROW(quantize_int8_blockwise(&x, 1, 0, &q, &s), Error);
  EXPECT_THROW(quantize_num_blocks(1, 0), Error);
  EXPECT_EQ(quantize_num_blocks(0, 8), 0u);
  EXPECT_EQ(quantize_num_blocks(17, 8), 3u);
}

}  // namespace
}  // namespace zs
