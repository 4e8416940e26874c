// Test data and helpers shared by the CPU AdamW tests (cpu_adam_test, state_adam_test): values
// of the kinds that break careless vector code, bitwise comparison, the paths this CPU has.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/cpu_adam_internal.h"

namespace zs::optim {

using detail::AdamIsa;

// A value of the kinds that break careless vector code: ordinary, huge, tiny, subnormal, zeros,
// and bf16/fp16 rounding ties.
inline float interesting(std::mt19937& rng, float scale) {
  std::uniform_int_distribution<int> kind(0, 15);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float sign = (rng() & 1) ? -1.0f : 1.0f;
  switch (kind(rng)) {
    case 0:
      return sign * 0.0f;
    case 1:
      return sign * 3.0e38f * std::abs(normal(rng)) / 4.0f;  // huge
    case 2:
      return sign * 1.0e-30f * std::abs(normal(rng));  // tiny
    case 3:
      return sign * 1.0e-40f * (1.0f + std::abs(normal(rng)));  // subnormal
    case 4:
      return std::numeric_limits<float>::denorm_min() * sign;
    case 5:
      return std::bit_cast<float>(
          static_cast<uint32_t>((rng() & 0xffff0000u) | 0x8000u));  // bf16 tie
    case 6:
      return std::bit_cast<float>(
          static_cast<uint32_t>((rng() & 0xc7ffe000u) | 0x1000u));  // fp16 tie-ish
    case 7:
      return sign * 65520.0f;  // fp16 overflow edge
    default:
      return scale * normal(rng);
  }
}

inline uint16_t random_finite_16(std::mt19937& rng, DType dt) {
  for (;;) {
    const auto h = static_cast<uint16_t>(rng());
    const bool finite = dt == DType::kBF16 ? ((h >> 7) & 0xff) != 0xff : ((h >> 10) & 0x1f) != 0x1f;
    if (finite) return h;
  }
}

// Index of the first differing element (by bytes of elem_size), or -1.
inline int64_t first_diff(const void* a, const void* b, int64_t n, size_t elem_size) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(static_cast<const char*>(a) + i * elem_size,
                    static_cast<const char*>(b) + i * elem_size, elem_size) != 0) {
      return i;
    }
  }
  return -1;
}

inline std::vector<AdamIsa> supported_isas() {
  std::vector<AdamIsa> out;
  for (AdamIsa isa : {AdamIsa::kScalar, AdamIsa::kAvx2, AdamIsa::kAvx512}) {
    if (detail::adam_isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

inline optim::AdamWStep test_step(int64_t t, float grad_scale) {
  optim::AdamWConfig cfg;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.95f;
  cfg.eps = 1e-8f;
  cfg.weight_decay = 0.1f;
  return optim::make_adamw_step(cfg, 3e-4f, t, grad_scale, /*with_decay=*/true);
}

}  // namespace zs::optim
