// ExactSum: the sum of any doubles has the same bits in any order and grouping, merged through
// the words as ranks merge it, and equals the exact sum rounded once (checked against __int128
// arithmetic where the exact sum fits, and on hand-made cases: cancellation, ties to even, sticky
// bits, subnormals, non-finite inputs).
#include "core/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace zs {
namespace {

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

double sum_of(const std::vector<double>& xs) {
  ExactSum s;
  for (double x : xs) s.add(x);
  return s.to_double();
}

TEST(ExactSum, HandMadeCases) {
  EXPECT_EQ(sum_of({}), 0.0);
  EXPECT_EQ(sum_of({1e308, 1.0, -1e308}), 1.0);  // catastrophic cancellation, exactly
  EXPECT_EQ(sum_of({1.0, std::ldexp(1.0, -60), -1.0}), std::ldexp(1.0, -60));
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(sum_of({tiny, tiny}), 2 * tiny);
  EXPECT_EQ(sum_of({std::ldexp(1.0, 53), 1.0}), std::ldexp(1.0, 53));  // tie: to even
  EXPECT_EQ(sum_of({std::ldexp(1.0, 53), 1.0, std::ldexp(1.0, -900)}),
            std::ldexp(1.0, 53) + 2.0);  // the sticky bit breaks the tie upwards
  EXPECT_EQ(sum_of({std::ldexp(1.0, 53), 3.0}), std::ldexp(1.0, 53) + 4.0);  // tie: to even
  EXPECT_EQ(sum_of({-2.5, 1.25}), -1.25);
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(sum_of({big, big, -big}), big);  // past the range of a double in between
  EXPECT_TRUE(std::isnan(sum_of({1.0, std::nan("")})));
  EXPECT_TRUE(std::isnan(sum_of({HUGE_VAL, -HUGE_VAL})));
  EXPECT_EQ(sum_of({1.0, HUGE_VAL}), HUGE_VAL);
  EXPECT_EQ(sum_of({1.0, -HUGE_VAL}), -HUGE_VAL);
}

// Doubles n * 2^-60 with |n| < 2^62: their exact sum is an __int128, rounded once by the
// conversion to double.
TEST(ExactSum, EqualsTheExactSumRoundedOnce) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> xs;
    __int128 exact = 0;
    const int n = 1 + static_cast<int>(rng() % 500);
    for (int i = 0; i < n; ++i) {
      // 53 random bits at a random position below 2^62, random sign: exactly n * 2^-60.
      const int64_t mant = static_cast<int64_t>(rng() >> 11);
      const int shift = static_cast<int>(rng() % 9);
      int64_t v = mant << shift;
      if (rng() & 1) v = -v;
      exact += v;
      xs.push_back(std::ldexp(static_cast<double>(v), -60));
    }
    const double want = exact < 0 ? -std::ldexp(static_cast<double>(-exact), -60)
                                  : std::ldexp(static_cast<double>(exact), -60);
    EXPECT_EQ(bits(sum_of(xs)), bits(want)) << "trial " << trial;
  }
}

// Any order, any split into parts merged through the words (as ranks merge them).
TEST(ExactSum, SameBitsInAnyOrderAndSplit) {
  std::mt19937_64 rng(11);
  std::vector<double> xs;
  for (int i = 0; i < 3000; ++i) {
    const double m = std::uniform_real_distribution<double>(-1.0, 1.0)(rng);
    xs.push_back(std::ldexp(m, static_cast<int>(rng() % 1200) - 600));
  }
  const uint64_t want = bits(sum_of(xs));
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(xs.begin(), xs.end(), rng);
    EXPECT_EQ(bits(sum_of(xs)), want);
    const int parts = 1 << (trial % 5);
    std::vector<double> total(ExactSum::kWords, 0.0);
    for (int p = 0; p < parts; ++p) {
      ExactSum s;
      for (size_t i = static_cast<size_t>(p); i < xs.size(); i += static_cast<size_t>(parts))
        s.add(xs[i]);
      std::vector<double> w(ExactSum::kWords);
      s.to_words(w.data());
      for (int i = 0; i < ExactSum::kWords; ++i)
        total[static_cast<size_t>(i)] += w[static_cast<size_t>(i)];
    }
    EXPECT_EQ(bits(ExactSum::from_words(total.data()).to_double()), want) << parts << " parts";
  }
  // The naive left-to-right sum of these is order-dependent: the test would see a plain sum.
  double a = 0.0, b = 0.0;
  for (double x : xs) a += x;
  std::reverse(xs.begin(), xs.end());
  for (double x : xs) b += x;
  EXPECT_NE(bits(a), bits(b));
}

}  // namespace
}  // namespace zs
