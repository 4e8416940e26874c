#include "runtime/param_init.h"

#include <cmath>

namespace zs {

namespace {

// splitmix64: a well-mixed 64-bit hash of a counter.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1] from 32 random bits.
double unit_interval(uint32_t bits) { return (static_cast<double>(bits) + 1.0) / 4294967296.0; }

}  // namespace

void init_param_values(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                       int64_t first, int64_t n, float* out) {
  const uint64_t key = mix(mix(seed) ^ (static_cast<uint64_t>(unit) << 32 | param));
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t r = mix(key ^ mix(static_cast<uint64_t>(first + k)));
    float v = 0.0f;
    switch (init.kind) {
      case Init::Kind::kZeros:
        v = 0.0f;
        break;
      case Init::Kind::kOnes:
        v = 1.0f;
        break;
      case Init::Kind::kConstant:
        v = init.a;
        break;
      case Init::Kind::kUniform:
        v = static_cast<float>(init.a +
                               (init.b - init.a) * (unit_interval(r >> 32) - 0.5 / 4294967296.0));
        break;
      case Init::Kind::kNormal: {  // Box-Muller on two 32-bit halves
        const double u1 = unit_interval(static_cast<uint32_t>(r >> 32));
        const double u2 = unit_interval(static_cast<uint32_t>(r));
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
        v = static_cast<float>(init.a + init.b * z);
        break;
      }
    }
    out[k] = v;
  }
}

}  // namespace zs
