#include "runtime/param_init.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/simd_dispatch.h"

namespace zs {

namespace {

// splitmix64: a well-mixed 64-bit hash of a counter.
[[gnu::always_inline]] inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1] from 32 random bits.
double unit_interval(uint32_t bits) { return (static_cast<double>(bits) + 1.0) / 4294967296.0; }

uint64_t param_key(uint64_t seed, uint32_t unit, uint32_t param) {
  return mix(mix(seed) ^ (static_cast<uint64_t>(unit) << 32 | param));
}

// The reference value of one element from its random word r: the definition of the draws.
float reference_value(const Init& init, uint64_t r) {
  switch (init.kind) {
    case Init::Kind::kZeros:
      return 0.0f;
    case Init::Kind::kOnes:
      return 1.0f;
    case Init::Kind::kConstant:
      return init.a;
    case Init::Kind::kUniform:
      return static_cast<float>(init.a +
                                (init.b - init.a) * (unit_interval(r >> 32) - 0.5 / 4294967296.0));
    case Init::Kind::kNormal: {  // Box-Muller on two 32-bit halves
      const double u1 = unit_interval(static_cast<uint32_t>(r >> 32));
      const double u2 = unit_interval(static_cast<uint32_t>(r));
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      return static_cast<float>(init.a + init.b * z);
    }
  }
  return 0.0f;
}

// ---- The vector path ([Note: vector draws] in param_init.h) ----

constexpr int kBlock = 256;  // elements per block: the random words and flags stay in L1

// 2^52 + bits as a double's bits, minus 2^52: the exact double of an integer below 2^52, in
// integer operations and one subtraction (no 64-bit integer conversion, which AVX2 lacks).
[[gnu::always_inline]] inline double small_to_double(uint64_t v) {
  return std::bit_cast<double>(0x4330000000000000ull | v) - 4503599627370496.0;
}

// The random words of elements [first, first + n) of the parameter with key `key`.
ZS_SIMD_BODY(void, random_words, (uint64_t key, int64_t first, int n, uint64_t* __restrict r)) {
  for (int k = 0; k < n; ++k) r[k] = mix(key ^ mix(static_cast<uint64_t>(first + k)));
}
ZS_SIMD_DISPATCH(void, random_words, (uint64_t key, int64_t first, int n, uint64_t* __restrict r),
                 (key, first, n, r))

// log(u) for u in [2^-32, 1], within a few units in the last place: u = 2^e f with f in
// [sqrt(1/2), sqrt(2)), log f = 2 atanh(s) with s = (f - 1) / (f + 1), |s| <= 0.1716, and the odd
// series of atanh to s^23 (the next term is below 2^-60 of the sum).
[[gnu::always_inline]] inline double approx_log(double u) {
  const uint64_t bits = std::bit_cast<uint64_t>(u);
  const uint64_t mant = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double f = std::bit_cast<double>(mant);   // [1, 2)
  uint64_t e = (bits >> 52) + 2048 - 1023;  // exponent + 2048 (>= 0)
  const bool big = f > 1.4142135623730951;
  f = big ? f * 0.5 : f;
  e = big ? e + 1 : e;
  const double ed = small_to_double(e) - 2048.0;
  const double s = (f - 1.0) / (f + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 23;
  p = 1.0 / 21 + s2 * p;
  p = 1.0 / 19 + s2 * p;
  p = 1.0 / 17 + s2 * p;
  p = 1.0 / 15 + s2 * p;
  p = 1.0 / 13 + s2 * p;
  p = 1.0 / 11 + s2 * p;
  p = 1.0 / 9 + s2 * p;
  p = 1.0 / 7 + s2 * p;
  p = 1.0 / 5 + s2 * p;
  p = 1.0 / 3 + s2 * p;
  const double log_f = 2.0 * s + 2.0 * s * (s2 * p);
  // ln 2 split so that ed * hi is exact (|ed| <= 33 needs 6 bits; hi has 20 trailing zeros).
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  return ed * kLn2Hi + (log_f + ed * kLn2Lo);
}

// cos(x) for x in [0, 2 pi + 1], within about 2^-52 absolute: x = k pi/2 + y with |y| <= pi/4
// (pi/2 as two parts of 33 bits, so that k * part is exact for k <= 4, and the rest), then the
// Taylor series of sin y (to y^19) or cos y (to y^18) with the sign of the quadrant.
[[gnu::always_inline]] inline double approx_cos(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double kPio2_1 = 1.57079632673412561417e+00, kPio2_2 = 6.07710050630396597660e-11,
                   kPio2_3 = 2.02226624879595063154e-21;
  const double kr = x * kTwoOverPi + kShift;
  const uint64_t q = std::bit_cast<uint64_t>(kr);  // the integer in the low bits
  const double k = kr - kShift;
  const double y = ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;
  const double y2 = y * y;
  double sp = -1.0 / 121645100408832000.0;  // -1/19!
  sp = 1.0 / 355687428096000.0 + y2 * sp;
  sp = -1.0 / 1307674368000.0 + y2 * sp;
  sp = 1.0 / 6227020800.0 + y2 * sp;
  sp = -1.0 / 39916800.0 + y2 * sp;
  sp = 1.0 / 362880.0 + y2 * sp;
  sp = -1.0 / 5040.0 + y2 * sp;
  sp = 1.0 / 120.0 + y2 * sp;
  sp = -1.0 / 6.0 + y2 * sp;
  const double sin_y = y + y * (y2 * sp);
  double cp = -1.0 / 6402373705728000.0;  // -1/18!
  cp = 1.0 / 20922789888000.0 + y2 * cp;
  cp = -1.0 / 87178291200.0 + y2 * cp;
  cp = 1.0 / 479001600.0 + y2 * cp;
  cp = -1.0 / 3628800.0 + y2 * cp;
  cp = 1.0 / 40320.0 + y2 * cp;
  cp = -1.0 / 720.0 + y2 * cp;
  cp = 1.0 / 24.0 + y2 * cp;
  const double cos_y = 1.0 - 0.5 * y2 + y2 * (y2 * cp);
  // cos(k pi/2 + y): k = 0: cos y, 1: -sin y, 2: -cos y, 3: sin y.
  const double c = (q & 1) ? sin_y : cos_y;
  return ((q + 1) & 2) ? -c : c;
}

// Normal draws of a block from its random words, and a flag per element whose value the vector
// arithmetic cannot vouch for ([Note: vector draws]); those are redone by reference_value.
ZS_SIMD_BODY(void, normal_block,
             (const uint64_t* __restrict r, int n, float mean, float std, float* __restrict out,
              uint8_t* __restrict redo)) {
  const double a = mean, b = std;
  for (int k = 0; k < n; ++k) {
    const uint64_t w = r[k];
    const double u1 = small_to_double((w >> 32) + 1) * (1.0 / 4294967296.0);
    const double u2 = small_to_double((w & 0xffffffffull) + 1) * (1.0 / 4294967296.0);
    const double z = std::sqrt(-2.0 * approx_log(u1)) * approx_cos(2.0 * M_PI * u2);
    const double t = a + b * z;
    // The reference's t differs from this one by far less than d (see the note): when every
    // value within d rounds to the same float, so does the reference's.
    const double d = 0x1p-40 * (std::fabs(a) + std::fabs(b) * (std::fabs(z) + 1.0));
    const float v = static_cast<float>(t);
    const float lo = static_cast<float>(t - d), hi = static_cast<float>(t + d);
    out[k] = v;
    redo[k] = lo != hi;
  }
}
ZS_SIMD_DISPATCH(void, normal_block,
                 (const uint64_t* __restrict r, int n, float mean, float std, float* __restrict out,
                  uint8_t* __restrict redo),
                 (r, n, mean, std, out, redo))

// Uniform draws: the reference's arithmetic exactly (only the conversions are spelled out).
ZS_SIMD_BODY(void, uniform_block,
             (const uint64_t* __restrict r, int n, float lo, float hi, float* __restrict out)) {
  const double range = static_cast<double>(hi - lo);  // a float subtraction, as the reference's
  for (int k = 0; k < n; ++k) {
    const double u = small_to_double((r[k] >> 32) + 1) * (1.0 / 4294967296.0);
    out[k] = static_cast<float>(lo + range * (u - 0.5 / 4294967296.0));
  }
}
ZS_SIMD_DISPATCH(void, uniform_block,
                 (const uint64_t* __restrict r, int n, float lo, float hi, float* __restrict out),
                 (r, n, lo, hi, out))

// One thread's share: elements [first, first + n), written to out[0, n).
void draw_range(const Init& init, uint64_t key, int64_t first, int64_t n, float* out) {
  if (init.kind != Init::Kind::kNormal && init.kind != Init::Kind::kUniform) {
    const float v = init.kind == Init::Kind::kOnes       ? 1.0f
                    : init.kind == Init::Kind::kConstant ? init.a
                                                         : 0.0f;
    std::fill(out, out + n, v);
    return;
  }
  alignas(64) uint64_t r[kBlock];
  alignas(64) uint8_t redo[kBlock];
  for (int64_t done = 0; done < n; done += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, n - done));
    float* o = out + done;
    random_words(key, first + done, m, r);
    if (init.kind == Init::Kind::kUniform) {
      uniform_block(r, m, init.a, init.b, o);
      continue;
    }
    normal_block(r, m, init.a, init.b, o, redo);
    for (int k = 0; k < m; ++k) {
      if (redo[k]) o[k] = reference_value(init, r[k]);
    }
  }
}

// Elements per thread below which one thread does it all.
constexpr int64_t kMinPerThread = 16384;

std::atomic<int64_t> g_drawn{0};

}  // namespace

void init_param_values_reference(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                                 int64_t first, int64_t n, float* out) {
  const uint64_t key = param_key(seed, unit, param);
  for (int64_t k = 0; k < n; ++k) {
    out[k] = reference_value(init, mix(key ^ mix(static_cast<uint64_t>(first + k))));
  }
}

void init_param_values(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                       int64_t first, int64_t n, float* out, int threads) {
  if (n <= 0) return;
  const uint64_t key = param_key(seed, unit, param);
  g_drawn.fetch_add(n, std::memory_order_relaxed);
  if (threads <= 0) threads = omp_get_max_threads();
  const int64_t pieces = std::clamp<int64_t>(n / kMinPerThread, 1, threads);
  if (pieces <= 1 || omp_in_parallel()) {
    draw_range(init, key, first, n, out);
    return;
  }
  // Pieces of whole blocks; each element's value depends on its index only, so the split (and
  // the thread count) changes nothing.
  const int64_t per = (n / pieces + kBlock - 1) / kBlock * kBlock;
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();  // the workers round as the caller does
#endif
#pragma omp parallel for num_threads(static_cast <int>(pieces)) schedule(static, 1)
  for (int64_t i = 0; i < pieces; ++i) {
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
#endif
    const int64_t b = std::min(n, i * per), e = i + 1 == pieces ? n : std::min(n, b + per);
    if (b < e) draw_range(init, key, first + b, e - b, out + b);
#if defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  }
}

int64_t param_values_drawn() { return g_drawn.load(std::memory_order_relaxed); }

}  // namespace zs
