#include "core/cpu_features.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"
#include "core/settings.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace zs {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's detection also checks (xgetbv) that the OS saves the YMM/ZMM state.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.f16c = __builtin_cpu_supports("f16c");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512fp16 = __builtin_cpu_supports("avx512fp16");
  // AMX-BF16: CPUID.(EAX=7,ECX=0):EDX[22]. Reported only (oneDNN decides whether to use it and
  // asks the OS for the tile state itself).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) f.amx_bf16 = (d >> 22) & 1u;
  // AVX512_VNNI: CPUID.(EAX=7,ECX=0):ECX[11] (needs the AVX-512 state: avx512f checked it);
  // AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX[4] (needs the YMM state: avx2 checked it).
  f.avx512vnni = f.avx512f && ((c >> 11) & 1u);
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = f.avx2 && ((a >> 4) & 1u);
#endif
  return f;
}

// The cap from the settings ([Note: environment settings] in core/settings.h), read once. `error`
// is non-empty for a bad value of any setting, so every call reports it alike.
struct Cap {
  SimdLevel level = SimdLevel::kAvx512;
  bool force_scalar = false;
  std::string error;
};

const Cap& settings_cap() {
  static const Cap cap = [] {
    Cap c;
    try {
      const Settings s = Settings::from_environment();
      c.force_scalar = s.force_scalar;
      c.level = s.force_scalar ? SimdLevel::kScalar : s.max_isa;
    } catch (const Error& e) {
      c.error = e.what();
    }
    return c;
  }();
  return cap;
}

const Cap& checked_cap() {
  const Cap& c = settings_cap();
  if (!c.error.empty()) throw Error(ErrorCode::kInvalidArgument, c.error);
  return c;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.f16c, "f16c");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx512fp16, "avx512fp16");
  add(f.amx_bf16, "amx-bf16");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx_vnni, "avx-vnni");
  return s.empty() ? "none" : s;
}

std::string cpu_model_name() {
  std::string name;
#if defined(__x86_64__) || defined(__i386__)
  unsigned top = __get_cpuid_max(0x80000000u, nullptr);
  if (top >= 0x80000004u) {
    char buf[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      unsigned r[4] = {};
      __get_cpuid(0x80000002u + i, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(buf + 16 * i, r, 16);
    }
    name = buf;
    const size_t b = name.find_first_not_of(' ');
    const size_t e = name.find_last_not_of(' ');
    name = b == std::string::npos ? "" : name.substr(b, e - b + 1);
  }
#endif
  return name.empty() ? "unknown" : name;
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
      return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx2 && f.f16c;
  }
  return false;
}

bool force_scalar() { return checked_cap().force_scalar; }

SimdLevel max_simd_level() { return checked_cap().level; }

bool simd_level_capped() {
  SimdLevel best = SimdLevel::kScalar;
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level_supported(l)) best = l;
  return max_simd_level() < best;
}

SimdLevel active_simd_level() {
  static const SimdLevel level = [] {
    const SimdLevel cap = max_simd_level();
    for (SimdLevel l : {SimdLevel::kAvx512, SimdLevel::kAvx2})
      if (l <= cap && simd_level_supported(l)) return l;
    return SimdLevel::kScalar;
  }();
  return level;
}

namespace {
// Whether oneDNN, capped by ONEDNN_MAX_CPU_ISA = `cap`, may run a VNNI kernel.
bool onednn_cap_allows_vnni(std::string cap) {
  if (cap.empty()) return true;
  std::transform(cap.begin(), cap.end(), cap.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  if (cap == "ALL") return true;
  for (const char* k : {"VNNI", "BF16", "FP16", "AMX"})
    if (cap.find(k) != std::string::npos) return true;
  return false;
}
}  // namespace

bool int8_gemm_supported() {
  static const bool onednn_ok = [] {
    try {
      return onednn_cap_allows_vnni(Settings::from_environment().onednn_max_cpu_isa);
    } catch (const Error&) {
      return false;  // a bad setting: active_simd_level() below throws it
    }
  }();
  const CpuFeatures& f = cpu_features();
  const SimdLevel level = active_simd_level();
  const bool vnni =
      (f.avx512vnni && level >= SimdLevel::kAvx512) || (f.avx_vnni && level >= SimdLevel::kAvx2);
  return vnni && onednn_ok;
}

}  // namespace zs
