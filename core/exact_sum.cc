#include "core/exact_sum.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace zs {

void ExactSum::add(double x) {
  if (!std::isfinite(x)) {
    if (std::isnan(x)) {
      ++nan_;
    } else {
      ++(x > 0 ? pos_inf_ : neg_inf_);
    }
    return;
  }
  if (x == 0.0) return;
  if (++adds_ >= (1 << 30)) normalize();
  int e = 0;
  const double f = std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1
  // x = m * 2^(e - 53) with |m| < 2^53 an integer.
  const int64_t m = static_cast<int64_t>(std::ldexp(f, 53));
  const int shift = e - 53 + kBias;  // bit position of m's lowest bit in the digit string
  ZS_ASSERT(shift >= 0);
  const int i = shift / 32, s = shift % 32;
  // m << s spans up to 85 bits: split into three 32-bit pieces with the sign of m.
  const uint64_t a = static_cast<uint64_t>(m < 0 ? -m : m);
  const unsigned __int128 w = static_cast<unsigned __int128>(a) << s;
  const int64_t sign = m < 0 ? -1 : 1;
  d_[static_cast<size_t>(i)] += sign * static_cast<int64_t>(static_cast<uint64_t>(w) & 0xffffffffu);
  d_[static_cast<size_t>(i + 1)] +=
      sign * static_cast<int64_t>(static_cast<uint64_t>(w >> 32) & 0xffffffffu);
  d_[static_cast<size_t>(i + 2)] += sign * static_cast<int64_t>(static_cast<uint64_t>(w >> 64));
}

void ExactSum::add(const ExactSum& other) {
  normalize();
  ExactSum o = other;
  o.normalize();
  for (int i = 0; i < kDigits; ++i) d_[static_cast<size_t>(i)] += o.d_[static_cast<size_t>(i)];
  nan_ += o.nan_;
  pos_inf_ += o.pos_inf_;
  neg_inf_ += o.neg_inf_;
  normalize();
}

void ExactSum::normalize() {
  int64_t carry = 0;
  for (int i = 0; i < kDigits - 1; ++i) {
    const int64_t v = d_[static_cast<size_t>(i)] + carry;
    const int64_t low = v & 0xffffffff;  // in [0, 2^32): arithmetic floor for negatives
    carry = (v - low) / (int64_t{1} << 32);
    d_[static_cast<size_t>(i)] = low;
  }
  d_[kDigits - 1] += carry;
  adds_ = 0;
}

double ExactSum::to_double() const {
  if (nan_ > 0 || (pos_inf_ > 0 && neg_inf_ > 0)) return std::nan("");
  if (pos_inf_ > 0) return HUGE_VAL;
  if (neg_inf_ > 0) return -HUGE_VAL;
  ExactSum t = *this;
  t.normalize();
  // Negative: negate the whole number (two's complement over the digit string).
  const bool neg = t.d_[kDigits - 1] < 0;
  if (neg) {
    for (int64_t& v : t.d_) v = -v;
    t.normalize();
  }
  int h = kDigits - 1;
  while (h >= 0 && t.d_[static_cast<size_t>(h)] == 0) --h;
  if (h < 0) return 0.0;
  // The top three digits as one exact integer (at most 96 bits: the top digit is below 2^32
  // once normalized and positive), a sticky bit for anything below, one correct rounding.
  unsigned __int128 v = 0;
  bool sticky = false;
  for (int i = h; i >= h - 2; --i) {
    v = (v << 32) | static_cast<uint64_t>(i >= 0 ? t.d_[static_cast<size_t>(i)] : 0);
  }
  for (int i = h - 3; i >= 0 && !sticky; --i) sticky = t.d_[static_cast<size_t>(i)] != 0;
  if (sticky) v |= 1;  // below the rounding position (v has > 64 significant bits then)
  const double r = std::ldexp(static_cast<double>(v), 32 * (h - 2) - kBias);
  return neg ? -r : r;
}

void ExactSum::to_words(double* words) {
  normalize();
  for (int i = 0; i < kDigits; ++i) words[i] = static_cast<double>(d_[static_cast<size_t>(i)]);
  words[kDigits] = static_cast<double>(nan_);
  words[kDigits + 1] = static_cast<double>(pos_inf_);
  words[kDigits + 2] = static_cast<double>(neg_inf_);
}

ExactSum ExactSum::from_words(const double* words) {
  ExactSum s;
  for (int i = 0; i < kDigits; ++i) s.d_[static_cast<size_t>(i)] = static_cast<int64_t>(words[i]);
  s.nan_ = static_cast<int64_t>(words[kDigits]);
  s.pos_inf_ = static_cast<int64_t>(words[kDigits + 1]);
  s.neg_inf_ = static_cast<int64_t>(words[kDigits + 2]);
  s.normalize();
  return s;
}

}  // namespace zs
