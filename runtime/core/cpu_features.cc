#include "runtime/core/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace zs {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's detection also checks (xgetbv) that the OS saves the YMM/ZMM state.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512fp16 = __builtin_cpu_supports("avx512fp16");
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::string_view simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "invalid";
}

bool simd_level_supported(SimdLevel level) {
  const CpuFeatures& f = cpu_features();
  switch (level) {
    case SimdLevel::kScalar:
      return true;
    case SimdLevel::kAvx2:
      return f.avx2 && f.f16c;
    case SimdLevel::kAvx512:
      return f.avx512f && f.avx2 && f.f16c;
  }
  return false;
}

bool force_scalar() {
  static const bool forced = [] {
    const char* v = std::getenv("ZS_FORCE_SCALAR");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return forced;
}

SimdLevel active_simd_level() {
  static const SimdLevel level = [] {
    if (force_scalar()) return SimdLevel::kScalar;
    if (simd_level_supported(SimdLevel::kAvx512)) return SimdLevel::kAvx512;
    if (simd_level_supported(SimdLevel::kAvx2)) return SimdLevel::kAvx2;
    return SimdLevel::kScalar;
  }();
  return level;
}

}  // namespace zs
