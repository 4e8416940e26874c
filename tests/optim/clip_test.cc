#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/convert.h"

namespace zs::optim {
namespace {

TEST(Clip, FactorFollowsTorchRule) {
  EXPECT_EQ(clip_factor(0.5, 1.0f), 1.0f);   // below the limit
  EXPECT_EQ(clip_factor(1.0, 1.0f), 1.0f);   // at the limit
  EXPECT_EQ(clip_factor(10.0, 0.0f), 1.0f);  // disabled
  EXPECT_EQ(clip_factor(10.0, -1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_factor(4.0, 1.0f), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_LE(clip_factor(4.0, 1.0f) * 4.0, 1.0);
}

TEST(Clip, SpanStatsSumsSquaresInFp64) {
  // 1e8 + 1 + 1 + ... would lose the ones in fp32; fp64 keeps them.
  std::vector<float> x(1001, 1.0f);
  x[0] = 1e4f;  // square 1e8
  const SpanStats s = span_stats(x.data(), DType::kF32, static_cast<int64_t>(x.size()));
  EXPECT_EQ(s.sum_squares, 1e8 + 1000.0);
  EXPECT_TRUE(s.finite);
  std::vector<uint16_t> h = {fp32_to_bf16_bits(3.0f), fp32_to_bf16_bits(-4.0f)};
  EXPECT_EQ(span_stats(h.data(), DType::kBF16, 2).sum_squares, 25.0);
  h = {fp32_to_fp16_bits(3.0f), fp32_to_fp16_bits(-4.0f)};
  EXPECT_EQ(span_stats(h.data(), DType::kF16, 2).sum_squares, 25.0);
  EXPECT_EQ(span_stats(nullptr, DType::kF32, 0).sum_squares, 0.0);
}

TEST(Clip, SpanStatsDetectsNanAndInf) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = {1.0f, bad, 2.0f};
    EXPECT_FALSE(span_stats(x.data(), DType::kF32, 3).finite) << bad;
    const uint16_t h[] = {fp32_to_fp16_bits(1.0f), fp32_to_fp16_bits(bad)};
    EXPECT_FALSE(span_stats(h, DType::kF16, 2).finite) << bad;
  }
  // fp32 max squared is finite in fp64.
  const float big = std::numeric_limits<float>::max();
  EXPECT_TRUE(span_stats(&big, DType::kF32, 1).finite);
}

}  // namespace
}  // namespace zs::optim
