// The fused AVX-512 pass of the int8-state AdamW (optim/state_adam_internal.h): decoding (by
// register permutes, or float8's integer arithmetic: core/state_quant_avx512.h) and the update of
// optim/adam_avx512.h in one loop, so the decoding overlaps the divisions and square roots.
#include "core/error.h"
#include "optim/state_adam_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
// _mm512_reduce_max_epu32 of GCC 12 reads an "undefined" vector (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/state_quant_avx512.h"
#include "optim/adam_avx512.h"
#endif

namespace zs::optim::detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {
using namespace state_quant_avx512;

// Decoders of 16 codes (value[c], before the scale): the book's tables by register permutes, or
// float8's integer arithmetic.
struct TableDecoder {
  __m512 m_reg[8], v_reg[16];
  ZS_STATE_QUANT_AVX512 TableDecoder(const StateCodeBook& m_book, const StateCodeBook& v_book) {
    load_decode_regs<true>(m_book, m_reg);
    load_decode_regs<false>(v_book, v_reg);
  }
  [[gnu::always_inline]] ZS_STATE_QUANT_AVX512 __m512 m(__m512i c) const {
    return decode_vec_avx512<true>(m_reg, c);
  }
  [[gnu::always_inline]] ZS_STATE_QUANT_AVX512 __m512 v(__m512i c) const {
    return decode_vec_avx512<false>(v_reg, c);
  }
};
struct Float8Decoder {
  [[gnu::always_inline]] ZS_STATE_QUANT_AVX512 __m512 m(__m512i c) const {
    return float8_decode_avx512<true>(c);
  }
  [[gnu::always_inline]] ZS_STATE_QUANT_AVX512 __m512 v(__m512i c) const {
    return float8_decode_avx512<false>(c);
  }
};

template <class Decoder>
ZS_STATE_QUANT_AVX512 BlockScales block_adam(const Decoder& dec, float* p, const float* g,
                                             const uint8_t* m_codes, float m_scale,
                                             const uint8_t* v_codes, float v_scale, int64_t len,
                                             const AdamWStep& s, float* m32, float* v32) {
  const adam_avx512::Consts c = adam_avx512::make_consts(s);
  const __m512 ms = _mm512_set1_ps(m_scale), vs = _mm512_set1_ps(v_scale);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512i m_max = _mm512_setzero_si512(), v_max = _mm512_setzero_si512();
  for (int64_t i = 0; i < len; i += 16) {
    const __m512i mc =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m_codes + i)));
    const __m512i vc =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v_codes + i)));
    __m512 m = _mm512_mul_ps(dec.m(mc), ms);
    __m512 v = _mm512_mul_ps(dec.v(vc), vs);
    __m512 pv = _mm512_loadu_ps(p + i);
    adam_avx512::update(c, _mm512_loadu_ps(g + i), pv, m, v);
    _mm512_storeu_ps(p + i, pv);
    _mm512_storeu_ps(m32 + i, m);
    _mm512_storeu_ps(v32 + i, v);
    m_max = _mm512_max_epu32(m_max, _mm512_and_si512(_mm512_castps_si512(m), abs_mask));
    v_max = _mm512_max_epu32(v_max, _mm512_and_si512(_mm512_castps_si512(v), abs_mask));
  }
  return {state_scale_from_absmax_bits(_mm512_reduce_max_epu32(m_max)),
          state_scale_from_absmax_bits(_mm512_reduce_max_epu32(v_max))};
}

}  // namespace

ZS_STATE_QUANT_AVX512 BlockScales int8_block_adam_avx512(
    float* p, const float* g, const uint8_t* m_codes, float m_scale, const uint8_t* v_codes,
    float v_scale, int64_t len, const StateCodeBook& m_book, const StateCodeBook& v_book,
    const AdamWStep& s, float* m32, float* v32) {
  if (m_book.code == StateCode::kFloat8 && v_book.code == StateCode::kFloat8) {
    return block_adam(Float8Decoder{}, p, g, m_codes, m_scale, v_codes, v_scale, len, s, m32, v32);
  }
  return block_adam(TableDecoder(m_book, v_book), p, g, m_codes, m_scale, v_codes, v_scale, len, s,
                    m32, v32);
}
#else
BlockScales int8_block_adam_avx512(float*, const float*, const uint8_t*, float, const uint8_t*,
                                   float, int64_t, const StateCodeBook&, const StateCodeBook&,
                                   const AdamWStep&, float*, float*) {
  fail(ErrorCode::kUnsupported, "int8_block_adam_avx512: not an x86-64 build");
}
#endif

}  // namespace zs::optim::detail
