#include "core/quantize.h"

#include <bit>
#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/error.h"
#include "core/simd_dispatch.h"

namespace zs {

int8_t quantize_int8_value(float v) {
  if (!(v > -127.0f)) return v <= -127.0f ? int8_t{-127} : int8_t{0};  // NaN -> 0
  if (v >= 127.0f) return 127;
  // |v| < 127: t and v - t are exact, so the tie test is exact and mode-independent.
  const float t = std::trunc(v);
  const float frac = std::fabs(v - t);
  int r = static_cast<int>(t);
  const bool odd = (r & 1) != 0;
  if (frac > 0.5f || (frac == 0.5f && odd)) r += v < 0 ? -1 : 1;
  return static_cast<int8_t>(r);
}

size_t quantize_num_blocks(size_t n, size_t block) {
  ZS_CHECK(block > 0, ErrorCode::kInvalidArgument, "quantize: block size must be > 0 (n = {})", n);
  return (n + block - 1) / block;
}

namespace {

// The largest magnitude's bits: |x| as an integer, whose order is the order of the magnitudes
// (inf and NaN above every finite value), so the loop vectorizes as an integer max.
ZS_SIMD_BODY(uint32_t, abs_bits_max, (const float* __restrict x, size_t m)) {
  uint32_t mx = 0;
  for (size_t i = 0; i < m; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    mx = a > mx ? a : mx;
  }
  return mx;
}
ZS_SIMD_DISPATCH(uint32_t, abs_bits_max, (const float* __restrict x, size_t m), (x, m))

// Scale of one block; NaN when the block holds a non-finite value (see quantize.h).
float block_scale(const float* x, size_t m) {
  const uint32_t bits = abs_bits_max(x, m);
  if (bits >= 0x7f800000u) return std::numeric_limits<float>::quiet_NaN();  // inf or NaN
  const float absmax = std::bit_cast<float>(bits);
  if (absmax == 0.0f) return 0.0f;
  float scale = absmax / 127.0f;
  // In the subnormal range the division loses bits; round up so absmax / scale <= 127.
  if (scale * 127.0f < absmax) scale = std::nextafter(scale, std::numeric_limits<float>::max());
  // Near FLT_MAX the rounded quotient can make 127 * scale overflow: dequantizing the absmax
  // would give inf. Round down instead; the absmax then clamps to 127, off by a few of its ulps.
  while (std::isinf(scale * 127.0f)) scale = std::nextafter(scale, 0.0f);
  return scale;
}

// q[i] = quantize_int8_value(x[i] / scale) for a block's finite x and its scale > 0, without
// branches so that it vectorizes: the same quotient, then round half to even on the truncation
// (an int conversion, exact: |v| <= 127 (1 + 2^-20) by block_scale) and the clamp applied to the
// integer, which gives the same value as clamping v first (round is monotone and maps +-127 to
// itself), so every level gives quantize_int8_value's bits.
ZS_SIMD_BODY(void, quantize_chunk,
             (const float* __restrict x, float scale, size_t n, int8_t* __restrict q)) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i] / scale;
    const int32_t r = static_cast<int32_t>(v);
    const float frac = std::fabs(v - static_cast<float>(r));
    const int32_t up = (frac > 0.5f ? 1 : 0) | (frac == 0.5f ? (r & 1) : 0);
    int32_t k = r + (v < 0.0f ? -up : up);
    k = k < -127 ? -127 : k;
    k = k > 127 ? 127 : k;
    q[i] = static_cast<int8_t>(k);
  }
}
ZS_SIMD_DISPATCH(void, quantize_chunk,
                 (const float* __restrict x, float scale, size_t n, int8_t* __restrict q),
                 (x, scale, n, q))

}  // namespace

void quantize_int8_blockwise(const float* x, size_t n, size_t block, int8_t* q, float* scales) {
  const size_t nb = quantize_num_blocks(n, block);
  for (size_t b = 0; b < nb; ++b) {
    const size_t begin = b * block;
    const size_t m = n - begin < block ? n - begin : block;
    const float scale = block_scale(x + begin, m);
    scales[b] = scale;
    if (!(scale > 0.0f)) {  // zeros, or non-finite (NaN scale)
      for (size_t i = 0; i < m; ++i) q[begin + i] = 0;
      continue;
    }
    quantize_chunk(x + begin, scale, m, q + begin);
  }
}

void dequantize_int8_blockwise(const int8_t* q, const float* scales, size_t n, size_t block,
                               float* x) {
  const size_t nb = quantize_num_blocks(n, block);
  for (size_t b = 0; b < nb; ++b) {
    const size_t begin = b * block;
    const size_t m = n - begin < block ? n - begin : block;
    const float scale = scales[b];
    for (size_t i = 0; i < m; ++i) x[begin + i] = static_cast<float>(q[begin + i]) * scale;
  }
}

void quantize_int8_rows(const float* x, size_t rows, size_t cols, int8_t* q, float* scales) {
  if (cols == 0) {  // empty rows: zero blocks (quantize.h)
    for (size_t r = 0; r < rows; ++r) scales[r] = 0.0f;
    return;
  }
  quantize_int8_blockwise(x, rows * cols, cols, q, scales);
}

namespace {

// out[i] = float(q[i]) * s: one fp32 multiply per element (exact conversion, one rounding), the
// same expression as the scalar reference, so every level gives the same bits.
ZS_SIMD_BODY(void, dequant_chunk,
             (const int8_t* __restrict q, float s, size_t n, float* __restrict out)) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * s;
}
ZS_SIMD_DISPATCH(void, dequant_chunk,
                 (const int8_t* __restrict q, float s, size_t n, float* __restrict out),
                 (q, s, n, out))

}  // namespace

void dequantize_int8_rows(const int8_t* q, const float* scales, size_t rows, size_t cols, void* out,
                          DType out_dtype) {
  ZS_CHECK(out_dtype == DType::kF32 || out_dtype == DType::kBF16 || out_dtype == DType::kF16,
           ErrorCode::kInvalidArgument,
           "dequantize_int8_rows: output dtype must be fp32, bf16 or fp16, got {} ({} x {})",
           dtype_name(out_dtype), rows, cols);
  if (out_dtype == DType::kF32) {
    auto* o = static_cast<float*>(out);
    for (size_t r = 0; r < rows; ++r) dequant_chunk(q + r * cols, scales[r], cols, o + r * cols);
    return;
  }
  // 16-bit output: the fp32 products of a piece of the row in an L1-sized tile, then the bulk
  // rounding of convert.h (the bits of convert(kF32 -> out_dtype)).
  void (*narrow)(const float*, uint16_t*, size_t) =
      out_dtype == DType::kBF16 ? fp32_to_bf16 : fp32_to_fp16;
  auto* o = static_cast<uint16_t*>(out);
  constexpr size_t kTile = 2048;  // 8 KiB of fp32
  alignas(64) float tile[kTile];
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* qr = q + r * cols;
    uint16_t* orow = o + r * cols;
    for (size_t j = 0; j < cols; j += kTile) {
      const size_t m = cols - j < kTile ? cols - j : kTile;
      dequant_chunk(qr + j, scales[r], m, tile);
      narrow(tile, orow + j, m);
    }
  }
}

void quantize_int8_unit(const float* x, size_t n, int8_t* q) {
  for (size_t i = 0; i < n; ++i) q[i] = quantize_int8_value(x[i]);
}

}  // namespace zs
