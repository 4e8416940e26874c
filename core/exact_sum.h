// An exact, order-independent sum of doubles (a fixed-point "superaccumulator"): every finite
// double is added without rounding, so the sum, rounded once at the end, has the same bits in any
// order and under any grouping, on one rank or merged across ranks. For the statistics that must
// not depend on how the work is split ([Note: world-invariant reduction] in
// runtime/engine_config.h): the loss and the gradient's sum of squares.
//
// Representation: the value is sum_i digit[i] * 2^(32 i - kBias), digits int64. Adding a double
// spreads its 53-bit significand over at most three digits; digits may run past 32 bits between
// normalize() calls (each add moves at most 2^32 into a digit, so 2^30 adds are always safe;
// add() normalizes by itself before that). NaN and infinities are counted apart: to_double()
// returns NaN when any NaN or both infinities were added, else the infinity.
//
// Across ranks: normalize(), then an fp64 sum of the digit words (digits() as doubles) over up to
// 2^20 ranks is exact (every word is an integer below 2^32 in magnitude), whatever the order;
// from_words() takes the result back. Not thread-safe; cheap to copy.
#pragma once

#include <array>
#include <cstdint>

namespace zs {

class ExactSum {
 public:
  // Digits cover 2^-1152 .. 2^1088: every finite double (down to 2^-1074) and sums of up to
  // 2^64 of the largest.
  static constexpr int kDigits = 70;
  static constexpr int kBias = 32 * 36;
  // Words exchanged across ranks: the digits, then the NaN, +inf and -inf counts.
  static constexpr int kWords = kDigits + 3;

  void add(double x);
  void add(const ExactSum& other);
  // Carries propagated: every digit but the top one in [0, 2^32).
  void normalize();
  // The exact sum rounded once to the nearest double (ties to even).
  double to_double() const;
  // The normalized state as kWords doubles (exact integers), and back from their sum over ranks.
  void to_words(double* words);
  static ExactSum from_words(const double* words);

 private:
  std::array<int64_t, kDigits> d_{};
  int64_t nan_ = 0, pos_inf_ = 0, neg_inf_ = 0;
  int32_t adds_ = 0;  // since the last normalize()
};

}  // namespace zs
