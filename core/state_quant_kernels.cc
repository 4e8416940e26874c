#include "core/state_quant_kernels.h"

#include <cstring>
#include <limits>

#include "core/simd_dispatch.h"
#include "core/state_quant_avx512.h"

#if defined(__x86_64__)
// GCC 12's intrinsic headers warn under -Wmaybe-uninitialized (GCC bug 105593), as in cpu_adam.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace zs {
// Named, not anonymous: ZS_SIMD_DISPATCH also defines the active-level entry points, unused here.
namespace state_quant_bodies {
#if defined(__x86_64__) && defined(__GNUC__)
using namespace state_quant_avx512;
#endif

// The scalar bodies are the vector paths' tails (fewer than one vector of elements).
[[gnu::always_inline]] inline void decode_block_body(const uint8_t* codes, float scale, int64_t n,
                                                     const float* value, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] = value[codes[i]] * scale;
}

ZS_SIMD_BODY(uint32_t, absmax_bits, (const float* x, int64_t n)) {
  uint32_t amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    u &= 0x7fffffffu;
    amax = u > amax ? u : amax;
  }
  return amax;
}
ZS_SIMD_DISPATCH(uint32_t, absmax_bits, (const float* x, int64_t n), (x, n))

// encode_state_value_fast, element by element.
[[gnu::always_inline]] inline void encode_block_body(const float* x, float scale, int64_t n,
                                                     const uint32_t* bucket, const float* mid,
                                                     uint32_t sign_mask, uint8_t* codes) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] / scale;
    uint32_t bits;
    std::memcpy(&bits, &r, 4);
    const uint32_t abits = bits & 0x7fffffffu;
    uint32_t b = abits >> 16;
    b = b < StateCodeBook::kBucketLo ? StateCodeBook::kBucketLo : b;
    b = b > StateCodeBook::kBucketHi ? StateCodeBook::kBucketHi : b;
    float a;
    std::memcpy(&a, &abits, 4);
    const uint32_t k = bucket[b - StateCodeBook::kBucketLo];
    uint32_t j = k + (a > mid[k] ? 1u : 0u);
    j = (sign_mask == 0 && j == 0 && abits != 0) ? 1u : j;  // a positive v keeps code >= 1
    const uint32_t neg = j != 0 ? (bits >> 24) & sign_mask : 0u;
    codes[i] = static_cast<uint8_t>(j | neg);
  }
}

// The float8 book's encoder (float8_index), element by element; r = x * inv.
[[gnu::always_inline]] inline void encode_f8_body(const float* x, float inv, int64_t n,
                                                  bool is_signed, uint8_t* codes) {
  const Float8Format f = float8_format(is_signed);
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] * inv;
    uint32_t bits;
    std::memcpy(&bits, &r, 4);
    const uint32_t q = float8_index(f, bits & 0x7fffffffu, is_signed);
    const uint32_t neg = (is_signed && q != 0) ? (bits >> 24) & 0x80u : 0u;
    codes[i] = static_cast<uint8_t>(q | neg);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The vector paths: the bodies' operations lane by lane (one correctly rounded division, integer
// bucket arithmetic, gathers from the book's tables, an ordered compare), so the same bits.
#define ZS_SQ_AVX2 [[gnu::target("avx2,f16c")]]

// Signed books: mag[c & 0x7f] with the sign of c (0x80 decodes to +0, as book.value[0x80]).
// Unsigned books: value[c] over all 256 codes.
template <bool kSigned>
ZS_STATE_QUANT_AVX512 void decode_avx512(const uint8_t* codes, float scale, int64_t n,
                                         const StateCodeBook& book, float* x) {
  constexpr int kN = kSigned ? 128 : 256;
  __m512 reg[kN / 16];
  load_decode_regs<kSigned>(book, reg);
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i c =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    const __m512 y = decode_vec_avx512<kSigned>(reg, c);
    _mm512_storeu_ps(x + i, _mm512_mul_ps(y, s));
  }
  decode_block_body(codes + i, scale, n - i, book.value, x + i);
}

// The binary search for j = #{k : a > mid_down[k]} over M magnitudes, level by level: at level L
// pos is a multiple of M >> L and is compared with mid_down[pos + (M >> (L + 1)) - 1], which is
// entry pos >> (log2 M - L) of level L of book.search_mid. Level L's table occupies registers
// [level_reg(L), level_reg(L + 1)).
constexpr int level_reg(int level) {
  int r = 0;
  for (int l = 0; l < level; ++l) r += l <= 4 ? 1 : (1 << l) / 16;
  return r;
}

// K independent vectors per call, so that their dependency chains (8 levels of shift, permute,
// compare, add) overlap in the core.
template <int M, int L, int K>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline void search_avx512(const __m512* reg,
                                                                       const __m512* a,
                                                                       __m512i* pos) {
  if constexpr ((1 << L) < M) {
    constexpr int kShift = __builtin_ctz(M) - L;
    for (int k = 0; k < K; ++k) {
      const __m512 mid =
          lookup_avx512<(1 << L)>(reg + level_reg(L), _mm512_srli_epi32(pos[k], kShift));
      const __mmask16 gt = _mm512_cmp_ps_mask(a[k], mid, _CMP_GT_OQ);
      pos[k] = _mm512_mask_add_epi32(pos[k], gt, pos[k], _mm512_set1_epi32(M >> (L + 1)));
    }
    search_avx512<M, L + 1, K>(reg, a, pos);
  }
}

// Codes of K vectors at x (16 K elements) by the search above.
template <int M, int K>
[[gnu::always_inline]] ZS_STATE_QUANT_AVX512 inline void encode_vecs_avx512(
    const __m512* reg, const float* x, __m512 scale, __m512i sign, uint8_t* codes) {
  __m512i bits[K], pos[K];
  __m512 a[K];
  for (int k = 0; k < K; ++k) {
    bits[k] = _mm512_castps_si512(_mm512_div_ps(_mm512_loadu_ps(x + 16 * k), scale));
    a[k] = _mm512_castsi512_ps(_mm512_and_si512(bits[k], _mm512_set1_epi32(0x7fffffff)));
    pos[k] = _mm512_setzero_si512();
  }
  search_avx512<M, 0, K>(reg, a, pos);
  for (int k = 0; k < K; ++k) {
    if constexpr (M == 256) {  // the unsigned book: a positive v keeps code >= 1
      const __mmask16 nz =
          _mm512_test_epi32_mask(_mm512_castps_si512(a[k]), _mm512_castps_si512(a[k]));
      pos[k] = _mm512_mask_max_epu32(pos[k], nz, pos[k], _mm512_set1_epi32(1));
    }
    const __m512i neg = _mm512_and_si512(_mm512_srli_epi32(bits[k], 24), sign);
    const __m512i j =
        _mm512_mask_or_epi32(pos[k], _mm512_test_epi32_mask(pos[k], pos[k]), pos[k], neg);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16 * k), _mm512_cvtepi32_epi8(j));
  }
}

template <int M>
ZS_STATE_QUANT_AVX512 void encode_search_avx512(const float* x, float scale, int64_t n,
                                                const StateCodeBook& book, uint8_t* codes) {
  constexpr int kLevels = __builtin_ctz(M);
  __m512 reg[level_reg(kLevels)];
  for (int l = 0; l < kLevels; ++l) {
    for (int k = level_reg(l); k < level_reg(l + 1); ++k) {
      reg[k] = _mm512_loadu_ps(book.search_mid + (1 << l) - 1 + 16 * (k - level_reg(l)));
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  const __m512i sign = _mm512_set1_epi32(book.is_signed ? 0x80 : 0);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) encode_vecs_avx512<M, 2>(reg, x + i, sc, sign, codes + i);
  for (; i + 16 <= n; i += 16) encode_vecs_avx512<M, 1>(reg, x + i, sc, sign, codes + i);
  encode_block_body(x + i, scale, n - i, book.bucket_first, book.mid_down,
                    book.is_signed ? 0x80u : 0u, codes + i);
}

ZS_SQ_AVX2 void decode_block_avx2(const uint8_t* codes, float scale, int64_t n, const float* value,
                                  float* x) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_i32gather_ps(value, idx, 4), s));
  }
  decode_block_body(codes + i, scale, n - i, value, x + i);
}

ZS_SQ_AVX2 void encode_block_avx2(const float* x, float scale, int64_t n, const uint32_t* bucket,
                                  const float* mid, uint32_t sign_mask, uint8_t* codes) {
  const __m256 sc = _mm256_set1_ps(scale);
  const __m256i lo = _mm256_set1_epi32(StateCodeBook::kBucketLo);
  const __m256i hi = _mm256_set1_epi32(StateCodeBook::kBucketHi);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), sign = _mm256_set1_epi32(sign_mask);
  // Byte 0 of each 32-bit lane, per 128-bit half.
  const __m256i pick =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_div_ps(_mm256_loadu_ps(x + i), sc));
    const __m256i abits = _mm256_and_si256(bits, abs_mask);
    __m256i b = _mm256_min_epu32(_mm256_max_epu32(_mm256_srli_epi32(abits, 16), lo), hi);
    const __m256i k =
        _mm256_i32gather_epi32(reinterpret_cast<const int*>(bucket), _mm256_sub_epi32(b, lo), 4);
    const __m256 m = _mm256_i32gather_ps(mid, k, 4);
    const __m256i gt =
        _mm256_castps_si256(_mm256_cmp_ps(_mm256_castsi256_ps(abits), m, _CMP_GT_OQ));
    __m256i j = _mm256_sub_epi32(k, gt);  // gt is -1 where true
    if (sign_mask == 0) {                 // the unsigned book: a positive v keeps code >= 1
      const __m256i nz = _mm256_andnot_si256(_mm256_cmpeq_epi32(abits, _mm256_setzero_si256()),
                                             _mm256_set1_epi32(1));
      j = _mm256_max_epu32(j, nz);
    }
    const __m256i zero = _mm256_cmpeq_epi32(j, _mm256_setzero_si256());
    const __m256i neg =
        _mm256_andnot_si256(zero, _mm256_and_si256(_mm256_srli_epi32(bits, 24), sign));
    const __m256i c = _mm256_shuffle_epi8(_mm256_or_si256(j, neg), pick);
    const __m128i packed =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), packed);
  }
  encode_block_body(x + i, scale, n - i, bucket, mid, sign_mask, codes + i);
}

template <bool kSigned>
ZS_STATE_QUANT_AVX512 void decode_f8_avx512(const uint8_t* codes, float scale, int64_t n,
                                            const float* value, float* x) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i c =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    _mm512_storeu_ps(x + i, _mm512_mul_ps(float8_decode_avx512<kSigned>(c), s));
  }
  decode_block_body(codes + i, scale, n - i, value, x + i);
}

template <bool kSigned>
ZS_STATE_QUANT_AVX512 void encode_f8_avx512(const float* x, float inv, int64_t n, uint8_t* codes) {
  const __m512 s = _mm512_set1_ps(inv);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = float8_encode_avx512<kSigned>(_mm512_mul_ps(_mm512_loadu_ps(x + i), s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(q));
  }
  encode_f8_body(x + i, inv, n - i, kSigned, codes + i);
}

// The float8 decoder of float8_decode_avx512 on 8 lanes.
ZS_SQ_AVX2 void decode_f8_avx2(const uint8_t* codes, float scale, int64_t n, bool is_signed,
                               const float* value, float* x) {
  const Float8Format f = float8_format(is_signed);
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i mask = _mm256_set1_epi32(is_signed ? 0x7f : 0xff);
  const __m256i k = _mm256_set1_epi32(static_cast<int>(f.k)), eight = _mm256_set1_epi32(8);
  const __m256 sub_out = _mm256_set1_ps(f.sub_out);
  const __m256i sign_from = _mm256_set1_epi32(is_signed ? 0x80 : 0xff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i c =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    const __m256i q = _mm256_and_si256(c, mask);
    const __m256 normal = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(q, k), 20));
    const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(q), sub_out);
    __m256 y = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpgt_epi32(eight, q)));
    const __m256i neg = _mm256_cmpgt_epi32(c, sign_from);  // signed codes above 0x80
    y = _mm256_xor_ps(y, _mm256_and_ps(_mm256_castsi256_ps(neg), _mm256_set1_ps(-0.0f)));
    _mm256_storeu_ps(x + i, _mm256_mul_ps(y, s));
  }
  decode_block_body(codes + i, scale, n - i, value, x + i);
}

// The float8 encoder of float8_encode_avx512 on 8 lanes.
ZS_SQ_AVX2 void encode_f8_avx2(const float* x, float inv, int64_t n, bool is_signed,
                               uint8_t* codes) {
  const Float8Format f = float8_format(is_signed);
  const __m256 s = _mm256_set1_ps(inv), sub_in = _mm256_set1_ps(f.sub_in);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), round = _mm256_set1_epi32(0x7ffff);
  const __m256i k = _mm256_set1_epi32(static_cast<int>(f.k));
  const __m256i top = _mm256_set1_epi32(static_cast<int>(f.top));
  const __m256i min_normal = _mm256_set1_epi32(static_cast<int>(f.min_normal));
  const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  const __m256i sign = _mm256_set1_epi32(is_signed ? 0x80 : 0);
  const __m256i pick =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(x + i), s));
    const __m256i abits = _mm256_and_si256(bits, abs_mask);
    const __m256i normal =
        _mm256_sub_epi32(_mm256_srli_epi32(_mm256_add_epi32(abits, round), 20), k);
    const __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(abits), sub_in);
    const __m256i t = _mm256_cvttps_epi32(y);
    const __m256i up = _mm256_castps_si256(
        _mm256_cmp_ps(_mm256_sub_ps(y, _mm256_cvtepi32_ps(t)), _mm256_set1_ps(0.5f), _CMP_GT_OQ));
    const __m256i sub = _mm256_sub_epi32(t, up);  // up is -1 where true
    const __m256i low = _mm256_cmpgt_epi32(min_normal, abits);
    __m256i q = _mm256_min_epu32(_mm256_blendv_epi8(normal, sub, low), top);
    if (is_signed) {
      const __m256i nz = _mm256_andnot_si256(_mm256_cmpeq_epi32(q, zero), sign);
      q = _mm256_or_si256(q, _mm256_and_si256(_mm256_srli_epi32(bits, 24), nz));
    } else {
      q = _mm256_max_epu32(q, _mm256_andnot_si256(_mm256_cmpeq_epi32(abits, zero), one));
    }
    const __m256i c = _mm256_shuffle_epi8(q, pick);
    const __m128i packed =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), packed);
  }
  encode_f8_body(x + i, inv, n - i, is_signed, codes + i);
}
#endif

}  // namespace state_quant_bodies

using namespace state_quant_bodies;

// Each entry point runs the chosen level's copy of the body (not the active one), so tests can
// compare the levels on one machine.
#if defined(__x86_64__) && defined(__GNUC__)
#define ZS_AT_LEVEL(level, name, args) \
  switch (level) {                     \
    case SimdLevel::kAvx512:           \
      return name##_avx512 args;       \
    case SimdLevel::kAvx2:             \
      return name##_avx2 args;         \
    default:                           \
      return name##_body args;         \
  }
#else
#define ZS_AT_LEVEL(level, name, args) \
  (void)level;                         \
  return name##_body args;
#endif

void decode_state_block(SimdLevel level, const uint8_t* codes, float scale, int64_t n,
                        const StateCodeBook& book, float* x) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (book.code == StateCode::kFloat8 && level == SimdLevel::kAvx512) {
    return book.is_signed ? decode_f8_avx512<true>(codes, scale, n, book.value, x)
                          : decode_f8_avx512<false>(codes, scale, n, book.value, x);
  }
  if (book.code == StateCode::kFloat8 && level == SimdLevel::kAvx2) {
    return decode_f8_avx2(codes, scale, n, book.is_signed, book.value, x);
  }
  if (level == SimdLevel::kAvx512) {
    return book.is_signed ? decode_avx512<true>(codes, scale, n, book, x)
                          : decode_avx512<false>(codes, scale, n, book, x);
  }
  if (level == SimdLevel::kAvx2) return decode_block_avx2(codes, scale, n, book.value, x);
#endif
  decode_block_body(codes, scale, n, book.value, x);
}

float state_block_scale_at(SimdLevel level, const float* x, int64_t n) {
  const uint32_t amax = [&]() -> uint32_t { ZS_AT_LEVEL(level, absmax_bits, (x, n)) }();
  return state_scale_from_absmax_bits(amax);
}

void encode_state_block(SimdLevel level, const float* x, float scale, int64_t n,
                        const StateCodeBook& book, uint8_t* codes) {
  if (!(scale >= state_min_scale(book))) {  // 0, NaN, float8's subnormal: code 0 everywhere
    std::memset(codes, 0, static_cast<size_t>(n));
    return;
  }
  const uint32_t sign_mask = book.is_signed ? 0x80u : 0u;
  if (book.code == StateCode::kFloat8) {
    const float inv = 1.0f / scale;
#if defined(__x86_64__) && defined(__GNUC__)
    if (level == SimdLevel::kAvx512) {
      return book.is_signed ? encode_f8_avx512<true>(x, inv, n, codes)
                            : encode_f8_avx512<false>(x, inv, n, codes);
    }
    if (level == SimdLevel::kAvx2) return encode_f8_avx2(x, inv, n, book.is_signed, codes);
#endif
    return encode_f8_body(x, inv, n, book.is_signed, codes);
  }
#if defined(__x86_64__) && defined(__GNUC__)
  if (level == SimdLevel::kAvx512) {
    return book.num_mag == 256 ? encode_search_avx512<256>(x, scale, n, book, codes)
                               : encode_search_avx512<128>(x, scale, n, book, codes);
  }
  if (level == SimdLevel::kAvx2) {
    return encode_block_avx2(x, scale, n, book.bucket_first, book.mid_down, sign_mask, codes);
  }
#endif
  encode_block_body(x, scale, n, book.bucket_first, book.mid_down, sign_mask, codes);
}

#undef ZS_AT_LEVEL

}  // namespace zs
