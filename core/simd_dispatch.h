// Run-time dispatch of a kernel written once: the body is compiled for AVX-512, AVX2 and the
// baseline, and the call picks one from zs::active_simd_level() (core/cpu_features.h), so
// the ISA cap (ZS_MAX_ISA) applies to every kernel family that uses it.
#pragma once

#include "core/cpu_features.h"

// [Note: dispatched kernels] A kernel is written once as a body and dispatched on
// zs::active_simd_level(), so ZS_MAX_ISA caps it like every other kernel family
// (core/cpu_features.h):
//
//   ZS_SIMD_BODY(void, scale_chunk, (float* x, int n)) { for (...) ...; }
//   ZS_SIMD_DISPATCH(void, scale_chunk, (float* x, int n), (x, n))
//
// defines scale_chunk(x, n), which calls the body inlined (flatten) into an AVX-512 or an AVX2
// function, or the baseline one. GCC inlines the baseline body into the wider targets because its
// ISA is a subset of theirs.
#define ZS_SIMD_BODY(ret, name, params) [[gnu::always_inline]] inline ret name##_body params

#if defined(__x86_64__) && defined(__GNUC__)
#define ZS_SIMD_DISPATCH(ret, name, params, args)                                                \
  [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c"),                                 \
    gnu::flatten]] ret name##_avx512 params {                                                    \
    return name##_body args;                                                                     \
  }                                                                                              \
  [[gnu::target("avx2,f16c"), gnu::flatten]] ret name##_avx2 params { return name##_body args; } \
  ret name params {                                                                              \
    switch (::zs::active_simd_level()) {                                                         \
      case ::zs::SimdLevel::kAvx512:                                                             \
        return name##_avx512 args;                                                               \
      case ::zs::SimdLevel::kAvx2:                                                               \
        return name##_avx2 args;                                                                 \
      default:                                                                                   \
        return name##_body args;                                                                 \
    }                                                                                            \
  }
#else
#define ZS_SIMD_DISPATCH(ret, name, params, args) \
  ret name params { return name##_body args; }
#endif
