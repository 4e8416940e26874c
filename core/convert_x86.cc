// Vector kernels for the bulk conversions, one target attribute per function (no global -march).
// Each processes whole vectors and leaves the tail to the scalar inline functions of convert.h.
//
// [Note: bitwise parity] The hardware conversions agree with the scalar functions except in two
// places, handled here by falling back to the scalar functions for the vector concerned:
// * vcvtneps2bf16 (AVX-512 BF16) flushes fp32 subnormal inputs to zero; the scalar rounding keeps
//   bf16 subnormals.
// * vcvtph2ps quiets signalling fp16 NaNs; the scalar widening keeps the payload bits as they
//   are (exactness). Any NaN in the vector takes the scalar path.
// vcvtps2ph with round-to-nearest-even matches the scalar narrowing for every input, NaNs
// included (quiet bit set, payload truncated, sign kept); tests/core checks all 2^32 inputs.
#include "core/convert.h"
#include "core/convert_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

// GCC 12 warns about the deliberately undefined pass-through operand (_mm512_undefined_*) inside
// its own AVX-512 intrinsics; a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define ZS_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define ZS_TARGET_AVX512 __attribute__((target("avx512f,avx2,f16c")))
#define ZS_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bf16,avx2,f16c")))

namespace zs::detail {
namespace {
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

void narrow_tail(const float* src, uint16_t* dst, size_t n, uint16_t (*f)(float)) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(src[i]);
}
void widen_tail(const uint16_t* src, float* dst, size_t n, float (*f)(uint16_t)) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(src[i]);
}
}  // namespace

// ---- AVX2 + F16C, 8 lanes ----

ZS_TARGET_AVX2 void fp32_to_bf16_avx2(const float* src, uint16_t* dst, size_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, bias), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet), nan);
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  narrow_tail(src + i, dst + i, n - i, fp32_to_bf16_bits);
}

ZS_TARGET_AVX2 void bf16_to_fp32_avx2(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), x);
  }
  widen_tail(src + i, dst + i, n - i, bf16_bits_to_fp32);
}

ZS_TARGET_AVX2 void fp32_to_fp16_avx2(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRne);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  narrow_tail(src + i, dst + i, n - i, fp32_to_fp16_bits);
}

ZS_TARGET_AVX2 void fp16_to_fp32_avx2(const uint16_t* src, float* dst, size_t n) {
  const __m128i abs_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, abs_mask), inf);
    if (!_mm_testz_si128(nan, nan)) {  // see [Note: bitwise parity]
      widen_tail(src + i, dst + i, 8, fp16_bits_to_fp32);
      continue;
    }
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  widen_tail(src + i, dst + i, n - i, fp16_bits_to_fp32);
}

// ---- AVX-512F, 16 lanes ----

ZS_TARGET_AVX512 void fp32_to_bf16_avx512(const float* src, uint16_t* dst, size_t n) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(src + i);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_and_si512(hi, one)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i out = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(out));
  }
  narrow_tail(src + i, dst + i, n - i, fp32_to_bf16_bits);
}

ZS_TARGET_AVX512BF16 void fp32_to_bf16_avx512bf16(const float* src, uint16_t* dst, size_t n) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7f800000), man_mask = _mm512_set1_epi32(0x7fffff);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(src + i);
    const __mmask16 subnormal = static_cast<__mmask16>(_mm512_testn_epi32_mask(x, exp_mask) &
                                                       _mm512_test_epi32_mask(x, man_mask));
    if (subnormal != 0) {  // see [Note: bitwise parity]
      narrow_tail(src + i, dst + i, 16, fp32_to_bf16_bits);
      continue;
    }
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_castsi512_ps(x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), reinterpret_cast<const __m256i&>(h));
  }
  narrow_tail(src + i, dst + i, n - i, fp32_to_bf16_bits);
}

ZS_TARGET_AVX512 void bf16_to_fp32_avx512(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  widen_tail(src + i, dst + i, n - i, bf16_bits_to_fp32);
}

ZS_TARGET_AVX512 void fp32_to_fp16_avx512(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRne);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  narrow_tail(src + i, dst + i, n - i, fp32_to_fp16_bits);
}

ZS_TARGET_AVX512 void fp16_to_fp32_avx512(const uint16_t* src, float* dst, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, abs_mask), inf);
    if (!_mm256_testz_si256(nan, nan)) {  // see [Note: bitwise parity]
      widen_tail(src + i, dst + i, 16, fp16_bits_to_fp32);
      continue;
    }
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  widen_tail(src + i, dst + i, n - i, fp16_bits_to_fp32);
}

}  // namespace zs::detail

#else  // not x86: the dispatcher never selects these; they exist so the table links.

namespace zs::detail {
void fp32_to_bf16_avx2(const float* s, uint16_t* d, size_t n) { fp32_to_bf16_scalar(s, d, n); }
void bf16_to_fp32_avx2(const uint16_t* s, float* d, size_t n) { bf16_to_fp32_scalar(s, d, n); }
void fp32_to_fp16_avx2(const float* s, uint16_t* d, size_t n) { fp32_to_fp16_scalar(s, d, n); }
void fp16_to_fp32_avx2(const uint16_t* s, float* d, size_t n) { fp16_to_fp32_scalar(s, d, n); }
void fp32_to_bf16_avx512(const float* s, uint16_t* d, size_t n) { fp32_to_bf16_scalar(s, d, n); }
void fp32_to_bf16_avx512bf16(const float* s, uint16_t* d, size_t n) {
  fp32_to_bf16_scalar(s, d, n);
}
void bf16_to_fp32_avx512(const uint16_t* s, float* d, size_t n) { bf16_to_fp32_scalar(s, d, n); }
void fp32_to_fp16_avx512(const float* s, uint16_t* d, size_t n) { fp32_to_fp16_scalar(s, d, n); }
void fp16_to_fp32_avx512(const uint16_t* s, float* d, size_t n) { fp16_to_fp32_scalar(s, d, n); }
}  // namespace zs::detail

#endif
