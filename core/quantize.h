// int8 quantization of fp32 data: absmax scaling with one fp32 scale per block, and a unit scale.
//
// Block-wise absmax: element i belongs to block b = i / block; its block's scale is
//   scale[b] = absmax(block b) / 127,   q[i] = round_half_even(x[i] / scale[b]) clamped to
//   [-127, 127],   dequantized x'[i] = q[i] * scale[b].
// The largest magnitude of a block maps to +-127 (exactly, whenever scale >= 2^-126). A block of
// zeros gets scale 0 and q 0. -128 is never produced, so the code is symmetric.
//
// Error bound (tested on random data): |x[i] - x'[i]| <= scale[b] / 2, up to fp32 rounding of the
// division and of the product: |x - x'| <= scale * (0.5 + 2^-15). Blocks whose absmax/127 falls in
// fp32's subnormal range get the scale rounded up (so nothing clamps and the bound still holds);
// their absmax may then map to slightly less than 127. Blocks whose absmax is within a few ulps of
// FLT_MAX get the scale rounded down so that 127 * scale stays finite (their absmax clamps to 127).
// Non-finite input: a block holding an inf or NaN gets scale NaN and q 0, so dequantizing it gives
// NaN everywhere in the block and overflow checks downstream see it.
//
// Row-wise (vector-wise) int8 for a matrix [rows, cols] stored row-major, e.g. a frozen weight W
// [out, in]: one scale per row, which is block-wise absmax with block = cols, the same rounding,
// bounds and non-finite rule per row. Dequantizing writes the compute dtype directly (fp32, bf16,
// fp16), each element rounded once from its exact-as-fp32 product.
//
// Rounding is computed exactly and does not depend on the floating-point environment.
// All functions are pure, single-threaded and thread-safe on disjoint outputs (a caller may split
// the rows of one matrix between threads); inputs and outputs must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zs {

// Number of scales for n elements in blocks of `block`: ceil(n / block).
size_t quantize_num_blocks(size_t n, size_t block);

// Quantizes x[0, n) into q[0, n) and scales[0, quantize_num_blocks(n, block)). The last block may
// be short. Throws zs::Error(kInvalidArgument) when block == 0.
void quantize_int8_blockwise(const float* x, size_t n, size_t block, int8_t* q, float* scales);

// x[i] = q[i] * scales[i / block]. Throws zs::Error(kInvalidArgument) when block == 0.
void dequantize_int8_blockwise(const int8_t* q, const float* scales, size_t n, size_t block,
                               float* x);

// Row-wise: quantize_int8_blockwise(x, rows * cols, cols, q, scales), so row r of x [rows, cols]
// goes to row r of q [rows, cols] with scale scales[r] (scales has `rows` entries). A row of zeros
// (and, when cols == 0, every row) gets scale 0. rows == 0 writes nothing.
void quantize_int8_rows(const float* x, size_t rows, size_t cols, int8_t* q, float* scales);

// Row-wise dequantization into the compute dtype: for out [rows, cols] of out_dtype,
//   out[r * cols + j] = round_to(out_dtype, float(q[r * cols + j]) * scales[r]),
// the fp32 product rounded once to nearest even by the conversions of core/convert.h, so the bits
// equal convert(&product, kF32, out, out_dtype, 1) element by element (for fp32: the product
// itself; a NaN scale gives NaN; an fp16 product of magnitude 65520 or more gives inf). The
// vector paths follow active_simd_level() (ZS_MAX_ISA) and give the same bits at every level.
// Throws zs::Error(kInvalidArgument) unless out_dtype is kF32, kBF16 or kF16 (checked first, also
// when rows or cols is 0). Allocates nothing (an fp32 tile on the stack).
void dequantize_int8_rows(const int8_t* q, const float* scales, size_t rows, size_t cols, void* out,
                          DType out_dtype);

// Unit scale: q[i] = round_half_even(x[i]) clamped to [-127, 127] (pi -> 3, 2.5 -> 2, NaN -> 0).
void quantize_int8_unit(const float* x, size_t n, int8_t* q);

// Round half to even of v clamped to [-127, 127], exact for every float; NaN gives 0.
int8_t quantize_int8_value(float v);

}  // namespace zs
