// Conversions between fp32 and the 16-bit float formats, round to nearest even.
//
// Contract (tested bit pattern by bit pattern in tests/core):
// * fp32 -> fp16: NaN stays NaN (quiet, sign kept), +-inf stays inf, signed zero kept; finite
//   magnitudes of 65520 and above become inf (65504 is the largest finite fp16); magnitudes below
//   2^-14 become subnormals in steps of 2^-24, exactly 2^-25 and below become zero (ties to even).
// * fp32 -> bf16: NaN stays NaN (quiet), inf stays inf, the upper 16 bits rounded to nearest even.
// * fp16/bf16 -> fp32 is exact; a NaN keeps its sign and payload bits (not quieted), so a NaN
//   round trip fp16 -> fp32 -> fp16 gives the quiet NaN of the same sign and payload.
// The scalar functions are inline and usable anywhere; the bulk functions pick an AVX-512/AVX2+F16C
// path at run time (cpu_features.h; ZS_FORCE_SCALAR=1 forces the scalar loops) and give the same
// bits as the scalar functions for every input, NaNs included (see [Note: bitwise parity] in
// convert_x86.cc; tests/core checks all 2^32 fp32 inputs and all 2^16 16-bit inputs).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/convert_bits.h"
#include "core/cpu_features.h"
#include "core/dtype.h"

namespace zs {

// The scalar conversions (core/convert_bits.h, shared with the CUDA kernels).
inline uint16_t fp32_to_bf16_bits(float f) { return bits::fp32_to_bf16(f); }
inline float bf16_bits_to_fp32(uint16_t h) { return bits::bf16_to_fp32(h); }
inline uint16_t fp32_to_fp16_bits(float f) { return bits::fp32_to_fp16(f); }
inline float fp16_bits_to_fp32(uint16_t h) { return bits::fp16_to_fp32(h); }

// Bulk conversions over n elements at active_simd_level(); src and dst must not overlap.
// Single-threaded; safe to call concurrently on disjoint buffers.
void fp32_to_bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_fp32(const uint16_t* src, float* dst, size_t n);
void fp32_to_fp16(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32(const uint16_t* src, float* dst, size_t n);

// Converts n elements between any two of fp32, fp16, bf16 (same dtype: a copy). Throws
// zs::Error(kInvalidArgument) for integer dtypes.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);

// convert() at an explicit level, for tests and benchmarks: the same bits as convert() whatever
// the level. Throws zs::Error(kUnsupported) when !simd_level_supported(level).
void convert_at(SimdLevel level, const void* src, DType src_dtype, void* dst, DType dst_dtype,
                size_t n);

// The implementation convert(src_dtype -> dst_dtype) uses in this process: "copy" (same dtype),
// "scalar", "avx2+f16c", "avx512f" or "avx512bf16" (fp32 -> bf16 on CPUs with AVX-512 BF16).
// fp16 <-> bf16 goes through fp32 in chunks and names its two kernels, e.g. "avx512f>avx512bf16".
// Throws like convert() for integer dtypes.
std::string convert_path_name(DType src_dtype, DType dst_dtype);

// Reads element i of a float buffer of dtype dt as fp32 (fp32, fp16, bf16).
inline float load_as_fp32(const void* p, DType dt, size_t i) {
  switch (dt) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kBF16:
      return bf16_bits_to_fp32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16:
      return fp16_bits_to_fp32(static_cast<const uint16_t*>(p)[i]);
    default:
      return 0.0f;
  }
}

// Writes v rounded to dt (fp32, fp16, bf16) into element i.
inline void store_from_fp32(void* p, DType dt, size_t i, float v) {
  switch (dt) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(p)[i] = fp32_to_bf16_bits(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(p)[i] = fp32_to_fp16_bits(v);
      break;
    default:
      break;
  }
}

}  // namespace zs
