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

}  // namespace zs::state_quant_avx512

#endif
