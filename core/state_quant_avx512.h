// AVX-512 pieces of the 8-bit state codes (core/state_quant.h) shared by core's block kernels and
// the fused AdamW of optim/state_adam.cc: table lookups by register permutes and the decoding of
// 16 codes. Internal; x86-64 GCC/Clang only; every function carries the AVX-512 target, so callers
// must too.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's intrinsic headers warn under -Wmaybe-uninitialized (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "core/state_quant.h"

#define ZS_STATE_QUANT_AVX512 [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c")]]

namespace zs::state_quant_avx512 {

// table[idx] for idx < N (N a power of two, <= 256) by register permutes from the table loaded
// into N / 16 registers, no gathers (gathers are slow on the Intel cores whose microcode mitigates
// Gather Data Sampling).
template <int N>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline __m512 lookup_avx512(const __m512* reg,
                                                                         __m512i idx) {
  if constexpr (N <= 16) {
    return _mm512_permutexvar_ps(idx, reg[0]);
  } else {
    constexpr int kPairs = N / 32;
    __m512 part[kPairs];
    for (int k = 0; k < kPairs; ++k) {
      part[k] = _mm512_permutex2var_ps(reg[2 * k], idx, reg[2 * k + 1]);
    }
    for (int bit = 5, count = kPairs; count > 1; ++bit, count /= 2) {
      const __mmask16 upper = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(1 << bit));
      for (int k = 0; k < count / 2; ++k) {
        part[k] = _mm512_mask_blend_ps(upper, part[2 * k], part[2 * k + 1]);
      }
    }
    return part[0];
  }
}

template <int N>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline void load_regs_avx512(const float* table,
                                                                          __m512* reg) {
  for (int k = 0; k < (N + 15) / 16; ++k) reg[k] = _mm512_loadu_ps(table + 16 * k);
}

// The registers decode_vec_avx512<kSigned> reads: book.mag[0, 128) (signed) or book.value (256).
template <bool kSigned>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline void load_decode_regs(const StateCodeBook& book,
                                                                          __m512* reg) {
  load_regs_avx512<kSigned ? 128 : 256>(kSigned ? book.mag : book.value, reg);
}

// book.value[c] for 16 codes c (epi32, < 256): signed books as mag[c & 0x7f] with the sign of c
// (0x80 gives +0, as book.value[0x80]); unsigned ones as value[c].
template <bool kSigned>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline __m512 decode_vec_avx512(const __m512* reg,
                                                                             __m512i c) {
  if constexpr (kSigned) {
    const __m512 y = lookup_avx512<128>(reg, c);  // the permutes read the low 7 bits
    const __mmask16 neg = _mm512_cmpgt_epu32_mask(c, _mm512_set1_epi32(0x80));
    return _mm512_mask_xor_ps(y, neg, y, _mm512_set1_ps(-0.0f));
  } else {
    return lookup_avx512<256>(reg, c);
  }
}

// The float8 book's value[c] for 16 codes c (epi32, < 256) by [Note: float8 state codes]: the
// bits (q + K) << 20, or q * 2^(-1 - 2^E) below 8; signed codes above 0x80 negative (0x80 is +0,
// as book.value[0x80]).
template <bool kSigned>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline __m512 float8_decode_avx512(__m512i c) {
  constexpr Float8Format f = float8_format(kSigned);
  const __m512i q = kSigned ? _mm512_and_si512(c, _mm512_set1_epi32(0x7f)) : c;
  const __m512 normal = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(q, _mm512_set1_epi32(static_cast<int>(f.k))), 20));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(f.sub_out));
  const __m512 y =
      _mm512_mask_blend_ps(_mm512_cmplt_epu32_mask(q, _mm512_set1_epi32(8)), normal, sub);
  if constexpr (kSigned) {
    const __mmask16 neg = _mm512_cmpgt_epu32_mask(c, _mm512_set1_epi32(0x80));
    return _mm512_mask_xor_ps(y, neg, y, _mm512_set1_ps(-0.0f));
  } else {
    return y;
  }
}

// The float8 codes (epi32) of 16 values r (|r| <= 1 + 2^-22, finite) by float8_index.
template <bool kSigned>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline __m512i float8_encode_avx512(__m512 r) {
  constexpr Float8Format f = float8_format(kSigned);
  const __m512i bits = _mm512_castps_si512(r);
  const __m512i abits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __m512i normal =
      _mm512_sub_epi32(_mm512_srli_epi32(_mm512_add_epi32(abits, _mm512_set1_epi32(0x7ffff)), 20),
                       _mm512_set1_epi32(static_cast<int>(f.k)));
  const __m512 y = _mm512_mul_ps(_mm512_castsi512_ps(abits), _mm512_set1_ps(f.sub_in));
  const __m512i t = _mm512_cvttps_epi32(y);
  const __mmask16 up =
      _mm512_cmp_ps_mask(_mm512_sub_ps(y, _mm512_cvtepi32_ps(t)), _mm512_set1_ps(0.5f), _CMP_GT_OQ);
  const __m512i sub = _mm512_mask_add_epi32(t, up, t, _mm512_set1_epi32(1));
  const __mmask16 low =
      _mm512_cmplt_epu32_mask(abits, _mm512_set1_epi32(static_cast<int>(f.min_normal)));
  __m512i q = _mm512_min_epu32(_mm512_mask_blend_epi32(low, normal, sub),
                               _mm512_set1_epi32(static_cast<int>(f.top)));
  if constexpr (kSigned) {
    const __m512i neg = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
    return _mm512_mask_or_epi32(q, _mm512_test_epi32_mask(q, q), q, neg);
  } else {
    return _mm512_mask_max_epu32(q, _mm512_test_epi32_mask(abits, abits), q, _mm512_set1_epi32(1));
  }
}

}  // namespace zs::state_quant_avx512

#endif
