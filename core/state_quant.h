// 8-bit block-wise quantization of optimizer states (AdamW's m and v): one fp32 scale (the
// block's absmax) per block of `block` elements and one byte per element that indexes a code book
// of values in [-1, 1]. Decoding is one fp32 product: x' = value[code] * scale.
//
// [Note: state code books] Two families, each with a signed book (for m) and an unsigned one (for
// v, which is never negative; an unsigned book encodes |x|). Magnitudes ascend from 0 to 1:
//   dynamic   (after bitsandbytes' dynamic map, Dettmers et al. 2021): decades 10^(e-6), e = 0..6,
//             each split linearly, value 10^(e-6) * (0.1 + 0.9 j / k_e), j = 1..k_e; signed:
//             k_e = 2^e (127 magnitudes + 0); unsigned: k_e = 2^(e+1) plus 1e-7 (255 + 0).
//             Relative precision ~1% from 1 down to 1e-6 (signed) / 1e-7 (unsigned).
//   linear    j / 127 (signed), j / 255 (unsigned): absolute precision 0.4% / 0.2% of absmax.
// Each magnitude is its double value rounded to fp32. Signed codes are sign-magnitude:
// code = (x < 0 ? 0x80 : 0) | j for j > 0, and 0 for magnitude index 0 (0x80 is never produced and
// decodes to 0). Unsigned codes are the magnitude index.
//
// Encoding of x in a block with absmax A (the largest |x| of the block):
//   A = 0:           scale 0, every code 0.
//   any x not finite: scale NaN, every code 0 (dequantizing gives NaN everywhere in the block).
//   otherwise:       scale A; r = x / A (one correctly rounded fp32 division, so |r| <= 1); the
//                    code is the magnitude nearest |r|, compared exactly with the exact midpoints
//                    of neighbouring magnitudes; a tie goes to the smaller magnitude.
// So the absmax element decodes to A exactly, and |x - x'| <= (half the gap from the chosen
// magnitude to its neighbours) * A, up to the rounding of the division and of the product.
//
// [Note: state code book choice] Dynamic, measured (tests/optim/state_adam_tracking_test.cc
// prints it): least squares 4096x1024, column scales 10^[-1, 1], batch 512, 300 AdamW steps, block
// 256. fp32 AdamW's final m and v through each book, relative RMS error:
//              m       v       update m / (sqrt(v) + eps)
//   dynamic    1.2%    0.55%   4.4%
//   linear     1.5%    0.61%   4.5e5 (x100%)
// and the final loss trained with the states: fp32 0.003991, bf16 -0.26%, int8 dynamic -1.5%,
// int8 linear 234117 (diverged). The books are alike on m and v by RMS, but linear codes round
// every v below absmax/510 of its block to 0 while m stays non-zero, and m / eps is a huge step;
// the dynamic book keeps v down to 1e-7 of absmax and m down to 1e-6.
// Rounding does not depend on the floating-point environment except through the division and the
// product (IEEE operations, as in the Adam update itself). All functions are pure and thread-safe.
#pragma once

#include <cstdint>

namespace zs {

enum class StateCode : uint8_t { kDynamic, kLinear };

// The tables of one code book. Magnitudes mag[0..num_mag) ascend from mag[0] = 0 to 1.
struct StateCodeBook {
  // Buckets of the fast encoder: |r| by its top 16 bits (exponent and 7 mantissa bits), clamped to
  // [2^-25, 1]; each bucket holds at most one midpoint (checked when the book is built).
  static constexpr uint32_t kBucketLo = 0x3300;  // bits(2^-25) >> 16
  static constexpr uint32_t kBucketHi = 0x3f80;  // bits(1.0) >> 16
  static constexpr int kBuckets = kBucketHi - kBucketLo + 1;

  bool is_signed = false;
  int num_mag = 0;           // 128 (signed) or 256 (unsigned)
  float value[256] = {};     // decoded value of each code byte
  float mag[256] = {};       // magnitudes, ascending
  float mid_down[256] = {};  // exact midpoint of mag[k], mag[k+1] rounded down to fp32; +inf last
  uint32_t bucket_first[kBuckets] = {};  // #{k : exact midpoint k < bucket's low end}
  // mid_down as a binary-search tree, level by level: level L (2^L entries) at [2^L - 1, 2^(L+1) -
  // 1), entry q = mid_down[(2q + 1) * (num_mag >> (L + 1)) - 1]; what the AVX-512 encoder permutes.
  float search_mid[256] = {};
};

// The book of `code` for a signed (m) or unsigned (v) state; built once, immutable.
const StateCodeBook& state_code_book(StateCode code, bool is_signed);

// "dynamic", "linear".
const char* state_code_name(StateCode code);

// Code of r = x / A (|r| <= 1, finite) by the definition: a search over the exact midpoints.
uint8_t encode_state_value(const StateCodeBook& book, float r);

// The same code by the bucket table (two loads and one compare); equal to encode_state_value for
// every finite |r| <= 1 (tested), which is what the vector kernels compute.
inline uint8_t encode_state_value_fast(const StateCodeBook& book, float r) {
  uint32_t bits;
  __builtin_memcpy(&bits, &r, 4);
  const uint32_t abits = bits & 0x7fffffffu;
  uint32_t b = abits >> 16;
  b = b < StateCodeBook::kBucketLo ? StateCodeBook::kBucketLo : b;
  b = b > StateCodeBook::kBucketHi ? StateCodeBook::kBucketHi : b;
  float a;
  __builtin_memcpy(&a, &abits, 4);
  const uint32_t k = book.bucket_first[b - StateCodeBook::kBucketLo];
  const uint32_t j = k + (a > book.mid_down[k] ? 1u : 0u);
  const bool neg = book.is_signed && (bits >> 31) != 0 && j != 0;
  return static_cast<uint8_t>(j | (neg ? 0x80u : 0u));
}

// Number of scales for n elements in blocks of `block`: ceil(n / block).
int64_t state_num_blocks(int64_t n, int64_t block);

// Throws zs::Error(kInvalidArgument) naming the value unless block is a positive multiple of 64.
void check_state_block(int64_t block);

// Quantizes x[0, n) into codes[0, n) and scales[0, state_num_blocks(n, block)) by the rule above;
// the last block may be short. Throws like check_state_block, or for n < 0.
void quantize_state_blockwise(const float* x, int64_t n, int64_t block, const StateCodeBook& book,
                              uint8_t* codes, float* scales);

// x[i] = book.value[codes[i]] * scales[i / block]. Throws like quantize_state_blockwise.
void dequantize_state_blockwise(const uint8_t* codes, const float* scales, int64_t n, int64_t block,
                                const StateCodeBook& book, float* x);

// The scale of a block whose largest |x| has the bits `amax_bits` (sign cleared): NaN when they
// are inf or NaN, otherwise that float (0 for an all-zero block).
inline float state_scale_from_absmax_bits(uint32_t amax_bits) {
  if (amax_bits >= 0x7f800000u) return __builtin_nanf("");
  float f;
  __builtin_memcpy(&f, &amax_bits, 4);
  return f;
}

// One block's scale by the rule above: its absmax, 0 or NaN. Its magnitude is compared as integer
// bits, so the result does not depend on the order of the elements.
float state_block_scale(const float* x, int64_t n);

}  // namespace zs
