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
//   float8    floating point with 3 mantissa bits, the top at 1: magnitude index q = 8 e + f,
//             value 2^(e - e_top) (1 + f / 8) for e >= 1 and 2^(1 - e_top) f / 8 for e = 0, where
//             e_top = 15 (signed: E4M3, 7 bits) or 31 (unsigned: E5M3, 8 bits). q_top = 8 e_top
//             is 1.0; the indices above it (values 1.125 .. 1.875) are never produced. Relative
//             precision 1/16 (half a step) or better from 1 down to 2^-14 (signed) / 2^-30
//             (unsigned). Codes come from the fp32 bits of r by integer rounding and decode by
//             integer shifts ([Note: float8 state codes]).
// Each magnitude is its double value rounded to fp32. Signed codes are sign-magnitude:
// code = (x < 0 ? 0x80 : 0) | j for j > 0, and 0 for magnitude index 0 (0x80 is never produced and
// decodes to 0). Unsigned codes are the magnitude index.
//
// Encoding of x in a block with absmax A (the largest |x| of the block):
//   A = 0:           scale 0, every code 0.
//   any x not finite: scale NaN, every code 0 (dequantizing gives NaN everywhere in the block).
//   float8, A below the smallest normal fp32 (2^-126): scale A, every code 0 (1 / A could overflow;
//                    such a block decodes to 0).
//   otherwise:       scale A; r = x / A (dynamic, linear: one correctly rounded fp32 division, so
//                    |r| <= 1) or r = x * (1 / A) (float8: 1 / A rounded once per block, then one
//                    rounded product per element, so |r| <= 1 + 2^-22); the code is the magnitude
//                    nearest |r|, compared exactly with the exact midpoints of neighbouring
//                    magnitudes; a tie goes to the smaller magnitude; except that in an unsigned
//                    book (v) a positive r never gets code 0 but at least code 1: a v decoded as 0
//                    beside a non-zero m would make AdamW's step m / eps, huge.
// So the absmax element decodes to A exactly (float8 too: A * (1 / A) is within 2^-23 of 1, whose
// nearest magnitude is 1), and
// |x - x'| <= (half the gap from the chosen magnitude to its neighbours) * A, up to the rounding
// of the division (product) and of the decoding product; a positive v below half the smallest
// non-zero magnitude of its book decodes to that magnitude instead (error up to that magnitude).
//
// [Note: state code book choice] float8 by default, dynamic as the alternative; measured
// (tests/optim/state_adam_tracking_test.cc prints it): least squares 4096x1024, column scales
// 10^[-1, 1], batch 512, 300 AdamW steps, block 256. fp32 AdamW's final m and v through each book,
// relative RMS error:
//              m       v       update m / (sqrt(v) + eps)
//   float8     2.4%    2.2%    3.1%
//   dynamic    1.2%    0.55%   4.4%
//   linear     1.5%    1.5%    54%
// and the final loss trained with the states: fp32 0.003991, bf16 -0.26%, int8 float8 -1.4%,
// int8 dynamic -1.7%, int8 linear +3560% (stalled). dynamic is finer near the absmax (7 bits of
// fraction in the top decade), float8 keeps 3 mantissa bits in every binade down to 2^-14 (m) /
// 2^-30 (v) of it, and the update divides m by sqrt(v) element by element, so the small elements'
// relative precision is what it needs: float8's update error is the smaller. Linear codes round
// every v below absmax/510 of its block to the smallest code (once 0: m / eps steps, 2e5x the
// loss), so small elements take tiny steps and the fit stalls. float8 is also the fast one
// ([Note: float8 state codes]).
// Rounding does not depend on the floating-point environment except through the division and the
// product (IEEE operations, as in the Adam update itself). All functions are pure and thread-safe.
#pragma once

#include <cstdint>

namespace zs {

enum class StateCode : uint8_t { kDynamic, kLinear, kFloat8 };

// The tables of one code book. Magnitudes mag[0..num_mag) ascend from mag[0] = 0 to 1.
struct StateCodeBook {
  // Buckets of the fast encoder: |r| by its top 16 bits (exponent and 7 mantissa bits), clamped to
  // [2^-36, 1]; each bucket holds at most one midpoint (checked when the book is built).
  static constexpr uint32_t kBucketLo = 0x2d80;  // bits(2^-36) >> 16
  static constexpr uint32_t kBucketHi = 0x3f80;  // bits(1.0) >> 16
  static constexpr int kBuckets = kBucketHi - kBucketLo + 1;

  StateCode code = StateCode::kDynamic;
  bool is_signed = false;
  bool reciprocal = false;   // r = x * (1 / A) (float8) rather than x / A
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

// "dynamic", "linear", "float8".
const char* state_code_name(StateCode code);

// The book family named `name` (state_code_name's spelling); throws zs::Error(kInvalidArgument)
// naming it and the choices otherwise.
StateCode parse_state_code(const char* name);

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
  uint32_t j = k + (a > book.mid_down[k] ? 1u : 0u);
  j = (!book.is_signed && j == 0 && abits != 0) ? 1u : j;  // a positive v keeps code >= 1
  const bool neg = book.is_signed && (bits >> 31) != 0 && j != 0;
  return static_cast<uint8_t>(j | (neg ? 0x80u : 0u));
}

// The smallest block scale whose codes are encoded (a block with a smaller scale, 0 or NaN gets
// code 0 everywhere): the smallest positive float, or for float8 the smallest normal one.
inline float state_min_scale(const StateCodeBook& book) {
  return book.reciprocal ? 0x1p-126f : 0x1p-149f;
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

// [Note: float8 state codes] The float8 books are chosen for speed at equal or better accuracy
// than dynamic's (measured: docs/memory.md, tests/optim/state_adam_tracking_test.cc): an encoder
// that searches 128 or 256 midpoints costs 2.7 / 4.1 cycles per element on AVX-512 (register
// permutes, 7 or 8 dependent levels), and gathers on AVX2; float8's is ten integer operations and
// its decoder four, identical on every ISA. With E exponent bits (4 signed, 5 unsigned),
// K = 8 (128 - 2^E) and a = |r| with fp32 bits `abits` (a <= 1 + 2^-22):
//   a >= 2^(2 - 2^E) (a normal of the book): q = ((abits + 0x7ffff) >> 20) - K. Adding 2^19 - 1 and
//     dropping the 20 low mantissa bits rounds to the nearest of the 8 steps of a's binade, ties
//     down; a carry moves into the exponent field, which is the next binade's first magnitude.
//   a below it: y = a * 2^(1 + 2^E), exact, in [0, 8); q = trunc(y) + (y - trunc(y) > 0.5).
//   then q = min(q, q_top), and in the unsigned book q = max(q, 1) when a > 0.
// That is encode_state_value's search on the same r (tests/core/state_quant_test.cc probes it).
// Decoding: q >= 8 is the float with bits (q + K) << 20; q < 8 is q * 2^(-1 - 2^E).
struct Float8Format {
  uint32_t k;           // 8 (128 - 2^E)
  uint32_t top;         // q of 1.0
  uint32_t min_normal;  // fp32 bits of 2^(2 - 2^E)
  float sub_in;         // 2^(1 + 2^E)
  float sub_out;        // 2^(-1 - 2^E)
};

inline constexpr Float8Format float8_format(bool is_signed) {
  return is_signed ? Float8Format{896, 120, 113u << 23, 131072.0f, 1.0f / 131072.0f}
                   : Float8Format{768, 248, 97u << 23, 8589934592.0f, 1.0f / 8589934592.0f};
}

// The magnitude index q of a (bits abits, sign clear) by the Note's rule.
inline uint32_t float8_index(const Float8Format& f, uint32_t abits, bool is_signed) {
  uint32_t q;
  if (abits >= f.min_normal) {
    q = ((abits + 0x7ffffu) >> 20) - f.k;
  } else {
    float a;
    __builtin_memcpy(&a, &abits, 4);
    const float y = a * f.sub_in;
    const int t = static_cast<int>(y);
    q = static_cast<uint32_t>(t) + (y - static_cast<float>(t) > 0.5f ? 1u : 0u);
  }
  q = q < f.top ? q : f.top;
  return (!is_signed && q == 0 && abits != 0) ? 1u : q;
}

// The magnitude of index q (< 128 signed, < 256 unsigned) by the Note's rule.
inline float float8_value(const Float8Format& f, uint32_t q) {
  if (q < 8) return static_cast<float>(q) * f.sub_out;
  const uint32_t bits = (q + f.k) << 20;
  float v;
  __builtin_memcpy(&v, &bits, 4);
  return v;
}

// One block's scale by the rule above: its absmax, 0 or NaN. Its magnitude is compared as integer
// bits, so the result does not depend on the order of the elements.
float state_block_scale(const float* x, int64_t n);

}  // namespace zs
