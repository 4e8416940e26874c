#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// [Note: sum of squares lanes]: lane j sums the squares of elements j, j + 8, ... in order, the
// lanes are added 0 to 7; bitwise, fp32 and bf16 (whose values go through 4096-element pieces),
// lengths off the 8 and across pieces. The test also runs under ZS_MAX_ISA=avx2 and scalar
// (optim_clip_test_avx2, _scalar): the same bits at every level.
TEST(Clip, SpanStatsLanesInAFixedOrder) {
  for (int64_t n : {1, 7, 8, 9, 1003, 9000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i)] =
          std::sin(0.731f * static_cast<float>(i)) * std::pow(10.0f, static_cast<float>(i % 7) - 3);
    }
    auto reference = [&](const std::vector<float>& v) {
      double lanes[8] = {};
      for (size_t i = 0; i < v.size(); ++i) lanes[i % 8] += static_cast<double>(v[i]) * v[i];
      double acc = 0.0;
      for (double l : lanes) acc += l;
      return acc;
    };
    const double want = reference(x);
    const double got = span_stats(x.data(), DType::kF32, n).sum_squares;
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << n << ": " << got << " vs " << want;
    std::vector<uint16_t> h(x.size());
    std::vector<float> widened(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = fp32_to_bf16_bits(x[i]);
      widened[i] = bf16_bits_to_fp32(h[i]);
    }
    const double want16 = reference(widened);
    const double got16 = span_stats(h.data(), DType::kBF16, n).sum_squares;
    EXPECT_EQ(std::memcmp(&got16, &want16, sizeof(double)), 0) << n << " bf16";
  }
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
