#include "optim/cpu_adam.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#if defined(__x86_64__)
// GCC 12's intrinsic headers initialise their "undefined" vectors from themselves and then warn
// about it under -Wmaybe-uninitialized (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "optim/adam_avx512.h"
#include "optim/cpu_adam_internal.h"

namespace zs::optim {
namespace {

using detail::AdamIsa;

// What the kernel writes besides p, m, v.
enum class Out { kNone, kF32, kBF16, kF16 };

// One thread's range [begin, end) of one update; every kernel has this shape. Returns true when an
// updated p is not finite or does not fit the out dtype (inf there): the check of
// [Note: non-finite policy], made on the values in registers.
using Kernel = bool (*)(float* p, const void* grad, float* m, float* v, int64_t begin, int64_t end,
                        const AdamWStep& s, void* out);

// [Note: overflow limit] |p|'s bits from which p is an inf or NaN, or rounds to an inf in the out
// dtype (round to nearest even): fp32 0x7f800000 (inf); bf16 0x7f7f8000 (halfway between the
// largest bf16, 0x7f7f0000, and inf, which is even); fp16 0x477ff000 (65520, halfway between
// 65504 and 65536). The fp32 order of |p| is the integer order of its bits, so one unsigned compare
// per element tells both.
template <Out O>
constexpr uint32_t overflow_limit() {
  if constexpr (O == Out::kBF16) return 0x7f7f8000u;
  if constexpr (O == Out::kF16) return 0x477ff000u;
  return 0x7f800000u;
}

// Below this many elements one thread does the whole span: an OpenMP fork costs a few
// microseconds, about what 32K elements take to stream.
constexpr int64_t kMinParallel = 32768;
// Range starts are multiples of this many elements (256 B of fp32, 128 B of 16-bit data): whole
// cache lines and whole vectors per thread when the spans are 64-byte aligned.
constexpr int64_t kRangeAlign = 64;

// ---------------------------------------------------------------------------------------------
// Scalar path: the reference's statements, specialised on the dtypes. Also the vector paths'
// tail (fewer than one vector of elements).

template <DType G>
inline float load_grad(const void* grad, int64_t i) {
  if constexpr (G == DType::kF32) return static_cast<const float*>(grad)[i];
  if constexpr (G == DType::kBF16) return bf16_bits_to_fp32(static_cast<const uint16_t*>(grad)[i]);
  if constexpr (G == DType::kF16) return fp16_bits_to_fp32(static_cast<const uint16_t*>(grad)[i]);
}

template <Out O>
inline void store_out(void* out, int64_t i, float x) {
  if constexpr (O == Out::kF32) static_cast<float*>(out)[i] = x;
  if constexpr (O == Out::kBF16) static_cast<uint16_t*>(out)[i] = fp32_to_bf16_bits(x);
  if constexpr (O == Out::kF16) static_cast<uint16_t*>(out)[i] = fp32_to_fp16_bits(x);
}

// [Note: AdamW operation order] in optim/adamw.h, statement for statement.
template <DType G, Out O>
inline bool adam_scalar_range(float* p, const void* grad, float* m, float* v, int64_t begin,
                              int64_t end, const AdamWStep& s, void* out) {
  uint32_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    const float g = load_grad<G>(grad, i) * s.grad_scale;
    float pi = p[i] * s.decay;
    const float mi = m[i] * s.beta1 + g * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + (g * g) * s.one_minus_beta2;
    pi = pi - s.step_size * (mi / (std::sqrt(vi) / s.bias2_sqrt + s.eps));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    store_out<O>(out, i, pi);
    bad |= (std::bit_cast<uint32_t>(pi) & 0x7fffffffu) >= overflow_limit<O>();
  }
  return bad != 0;
}

template <DType G, Out O>
bool adam_scalar(float* p, const void* grad, float* m, float* v, int64_t begin, int64_t end,
                 const AdamWStep& s, void* out) {
  return adam_scalar_range<G, O>(p, grad, m, v, begin, end, s, out);
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------------------------
// AVX-512 path, 16 lanes. Only correctly rounded operations (mul, add, sub, div, sqrt), in the
// reference's order; the project's -ffp-contract=off keeps the compiler from fusing them.
//   bf16 in:  zero-extend to 32 bits and shift left 16 (exact).
//   fp16 in:  vcvtph2ps (exact; a signalling NaN comes out quiet, as the multiply by grad_scale
//             would make it anyway).
//   bf16 out: the integer rounding of fp32_to_bf16_bits: NaN -> (x >> 16) | 0x40, otherwise
//             (x + 0x7fff + ((x >> 16) & 1)) >> 16. (vcvtneps2bf16 is not used: it flushes
//             subnormal inputs to zero, which the scalar conversion does not.)
//   fp16 out: vcvtps2ph with round-to-nearest-even, which matches fp32_to_fp16_bits bit for bit
//             (overflow to inf, subnormals, quiet NaN with the payload's top bits).

#define ZS_AVX512_TARGET __attribute__((target("avx512f,avx2,f16c")))

template <DType G, Out O>
ZS_AVX512_TARGET bool adam_avx512(float* p, const void* grad, float* m, float* v, int64_t begin,
                                  int64_t end, const AdamWStep& s, void* out) {
  const adam_avx512::Consts c = adam_avx512::make_consts(s);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(overflow_limit<O>()));
  __mmask16 bad = 0;
  const auto* g16 = static_cast<const uint16_t*>(grad);
  const auto* g32 = static_cast<const float*>(grad);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 g;
    if constexpr (G == DType::kF32) {
      g = _mm512_loadu_ps(g32 + i);
    } else if constexpr (G == DType::kBF16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g16 + i));
      g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      g = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g16 + i)));
    }
    __m512 pv = _mm512_loadu_ps(p + i), mv = _mm512_loadu_ps(m + i), vv = _mm512_loadu_ps(v + i);
    adam_avx512::update(c, g, pv, mv, vv);
    bad |= _mm512_cmpge_epu32_mask(_mm512_and_si512(_mm512_castps_si512(pv), abs_mask), limit);
    _mm512_storeu_ps(p + i, pv);
    _mm512_storeu_ps(m + i, mv);
    _mm512_storeu_ps(v + i, vv);
    if constexpr (O == Out::kF32) {
      _mm512_storeu_ps(static_cast<float*>(out) + i, pv);
    } else if constexpr (O == Out::kBF16) {
      const __m512i x = _mm512_castps_si512(pv);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(
          _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
      const __m512i hi = _mm512_srli_epi32(x, 16);
      const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
      __m512i r = _mm512_srli_epi32(
          _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
      r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(out) + i),
                          _mm512_cvtepi32_epi16(r));
    } else if constexpr (O == Out::kF16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(out) + i),
                          _mm512_cvtps_ph(pv, _MM_FROUND_TO_NEAREST_INT));
    }
  }
  return adam_scalar_range<G, O>(p, grad, m, v, i, end, s, out) || bad != 0;
}

// ---------------------------------------------------------------------------------------------
// AVX2 path, 8 lanes; the same operations and conversions as the AVX-512 path.

#define ZS_AVX2_TARGET __attribute__((target("avx2,f16c")))

template <DType G, Out O>
ZS_AVX2_TARGET bool adam_avx2(float* p, const void* grad, float* m, float* v, int64_t begin,
                              int64_t end, const AdamWStep& s, void* out) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  // |p| > limit - 1: both sides are non-negative as int32, so the signed compare is the unsigned.
  const __m256i below = _mm256_set1_epi32(static_cast<int>(overflow_limit<O>() - 1));
  __m256i bad = _mm256_setzero_si256();
  const __m256 gs = _mm256_set1_ps(s.grad_scale);
  const __m256 decay = _mm256_set1_ps(s.decay);
  const __m256 b1 = _mm256_set1_ps(s.beta1);
  const __m256 omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 b2 = _mm256_set1_ps(s.beta2);
  const __m256 omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 step = _mm256_set1_ps(s.step_size);
  const __m256 b2s = _mm256_set1_ps(s.bias2_sqrt);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const auto* g16 = static_cast<const uint16_t*>(grad);
  const auto* g32 = static_cast<const float*>(grad);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 g;
    if constexpr (G == DType::kF32) {
      g = _mm256_loadu_ps(g32 + i);
    } else if constexpr (G == DType::kBF16) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g16 + i));
      g = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      g = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g16 + i)));
    }
    g = _mm256_mul_ps(g, gs);
    __m256 pv = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
    const __m256 mv =
        _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(g, omb1));
    const __m256 vv = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                    _mm256_mul_ps(_mm256_mul_ps(g, g), omb2));
    const __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), b2s), eps);
    pv = _mm256_sub_ps(pv, _mm256_mul_ps(step, _mm256_div_ps(mv, den)));
    bad = _mm256_or_si256(
        bad, _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(pv), abs_mask), below));
    _mm256_storeu_ps(p + i, pv);
    _mm256_storeu_ps(m + i, mv);
    _mm256_storeu_ps(v + i, vv);
    if constexpr (O == Out::kF32) {
      _mm256_storeu_ps(static_cast<float*>(out) + i, pv);
    } else if constexpr (O == Out::kBF16) {
      const __m256i x = _mm256_castps_si256(pv);
      // Both sides are non-negative as int32, so the signed compare is the unsigned one.
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                             _mm256_set1_epi32(0x7f800000));
      const __m256i hi = _mm256_srli_epi32(x, 16);
      const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
      __m256i r = _mm256_srli_epi32(
          _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
      r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
      // Every lane is <= 0xffff, so the saturating pack is a plain narrowing.
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + i), packed);
    } else if constexpr (O == Out::kF16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + i),
                       _mm256_cvtps_ph(pv, _MM_FROUND_TO_NEAREST_INT));
    }
  }
  return adam_scalar_range<G, O>(p, grad, m, v, i, end, s, out) || !_mm256_testz_si256(bad, bad);
}
#endif  // __x86_64__

// ---------------------------------------------------------------------------------------------
// Dispatch.

template <DType G>
Kernel pick_for_grad(AdamIsa isa, Out o) {
  auto choose = [&](auto k_none, auto k_f32, auto k_bf16, auto k_f16) -> Kernel {
    switch (o) {
      case Out::kNone:
        return k_none;
      case Out::kF32:
        return k_f32;
      case Out::kBF16:
        return k_bf16;
      case Out::kF16:
        return k_f16;
    }
    return nullptr;
  };
  switch (isa) {
#if defined(__x86_64__)
    case AdamIsa::kAvx512:
      return choose(&adam_avx512<G, Out::kNone>, &adam_avx512<G, Out::kF32>,
                    &adam_avx512<G, Out::kBF16>, &adam_avx512<G, Out::kF16>);
    case AdamIsa::kAvx2:
      return choose(&adam_avx2<G, Out::kNone>, &adam_avx2<G, Out::kF32>, &adam_avx2<G, Out::kBF16>,
                    &adam_avx2<G, Out::kF16>);
#endif
    default:
      return choose(&adam_scalar<G, Out::kNone>, &adam_scalar<G, Out::kF32>,
                    &adam_scalar<G, Out::kBF16>, &adam_scalar<G, Out::kF16>);
  }
}

Kernel pick_kernel(AdamIsa isa, DType grad_dtype, const void* out, DType out_dtype) {
  Out o = Out::kNone;
  if (out != nullptr) {
    switch (out_dtype) {
      case DType::kF32:
        o = Out::kF32;
        break;
      case DType::kBF16:
        o = Out::kBF16;
        break;
      case DType::kF16:
        o = Out::kF16;
        break;
      default:
        fail(ErrorCode::kInvalidArgument, "cpu_adamw: out dtype {} (fp32, bf16 or fp16 expected)",
             dtype_name(out_dtype));
    }
  }
  switch (grad_dtype) {
    case DType::kF32:
      return pick_for_grad<DType::kF32>(isa, o);
    case DType::kBF16:
      return pick_for_grad<DType::kBF16>(isa, o);
    case DType::kF16:
      return pick_for_grad<DType::kF16>(isa, o);
    default:
      fail(ErrorCode::kInvalidArgument, "cpu_adamw: grad dtype {} (fp32, bf16 or fp16 expected)",
           dtype_name(grad_dtype));
  }
}

std::atomic<int> g_threads{0};  // 0: omp_get_max_threads()

// True when every updated value is finite (and fits the out dtype).
bool run(AdamIsa isa, int threads, float* p, const void* grad, DType grad_dtype, float* m, float* v,
         int64_t n, const AdamWStep& s, void* out, DType out_dtype) {
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "cpu_adamw: n = {} < 0", n);
  const Kernel k = pick_kernel(isa, grad_dtype, out, out_dtype);
  if (n == 0) return true;
  std::atomic<bool> bad{false};
  detail::parallel_ranges(threads, n, kRangeAlign, [&](int64_t begin, int64_t end) {
    if (k(p, grad, m, v, begin, end, s, out)) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

}  // namespace

namespace detail {

const char* adam_isa_name(AdamIsa isa) {
  switch (isa) {
    case AdamIsa::kScalar:
      return "scalar";
    case AdamIsa::kAvx2:
      return "avx2";
    case AdamIsa::kAvx512:
      return "avx512";
  }
  return "invalid";
}

static_assert(static_cast<int>(SimdLevel::kScalar) == static_cast<int>(AdamIsa::kScalar) &&
              static_cast<int>(SimdLevel::kAvx2) == static_cast<int>(AdamIsa::kAvx2) &&
              static_cast<int>(SimdLevel::kAvx512) == static_cast<int>(AdamIsa::kAvx512));

// The levels are the core's (core/cpu_features.h): one detection, one cap (ZS_MAX_ISA).
bool adam_isa_supported(AdamIsa isa) {
  return simd_level_supported(static_cast<SimdLevel>(static_cast<int>(isa)));
}

AdamIsa active_adam_isa() { return static_cast<AdamIsa>(static_cast<int>(active_simd_level())); }

void parallel_ranges(int threads, int64_t n, int64_t align,
                     const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 1 || n < kMinParallel) {
    fn(0, n);
    return;
  }
  // Ranges of `per` elements (a multiple of align), one per requested thread. If OpenMP grants
  // fewer threads (nested region, thread limit), each takes several ranges in turn.
  const int64_t per = (n + threads - 1) / threads;
  const int64_t per_aligned = (per + align - 1) / align * align;
  const int ranges = static_cast<int>((n + per_aligned - 1) / per_aligned);
#if defined(__x86_64__)
  // Workers compute under the caller's MXCSR (FTZ/DAZ, rounding), so a caller that changed it
  // gets what the reference gives on its own thread.
  const unsigned csr = _mm_getcsr();
#endif
#pragma omp parallel num_threads(ranges)
  {
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
#endif
    const int team = omp_get_num_threads();
    for (int r = omp_get_thread_num(); r < ranges; r += team) {
      const int64_t begin = r * per_aligned;
      fn(begin, std::min(n, begin + per_aligned));
    }
#if defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  }
}

void adam_f32_span(AdamIsa isa, float* p, const float* g, float* m, float* v, int64_t n,
                   const AdamWStep& s) {
  pick_kernel(isa, DType::kF32, nullptr, DType::kF32)(p, g, m, v, 0, n, s, nullptr);
}

bool cpu_adamw_with(AdamIsa isa, int threads, float* p, const void* grad, DType grad_dtype,
                    float* m, float* v, int64_t n, const optim::AdamWStep& s, void* out,
                    DType out_dtype) {
  ZS_CHECK(adam_isa_supported(isa), ErrorCode::kUnsupported,
           "cpu_adamw: the {} path is not supported by this CPU", adam_isa_name(isa));
  ZS_CHECK(threads >= 1, ErrorCode::kInvalidArgument, "cpu_adamw: threads = {} < 1", threads);
  return run(isa, threads, p, grad, grad_dtype, m, v, n, s, out, out_dtype);
}

}  // namespace detail

bool cpu_adamw(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
               const optim::AdamWStep& s, void* out, DType out_dtype) {
  return run(detail::active_adam_isa(), cpu_adam_threads(), p, grad, grad_dtype, m, v, n, s, out,
             out_dtype);
}

void set_cpu_adam_threads(int threads) { g_threads.store(std::max(0, threads)); }

int cpu_adam_threads() {
  const int t = g_threads.load();
  return t > 0 ? t : omp_get_max_threads();
}

const char* cpu_adam_isa() { return detail::adam_isa_name(detail::active_adam_isa()); }

}  // namespace zs::optim
