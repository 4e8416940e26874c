// What the CPU this process runs on can do, detected once at run time, and the vector level the
// run-time dispatched kernels use (bulk conversions, CPU Adam, the layers' row kernels, the
// collectives' reductions).
//
// Nothing in zeroshard is compiled with a global -march flag: kernels that need AVX2 or AVX-512
// are compiled per function (__attribute__((target(...)))) and chosen here, so one binary runs on
// any x86-64 CPU and uses what it has. On other architectures every feature reads false.
//
// [Note: ISA cap] A setting caps the level, so that one machine can run every lower path:
//   ZS_MAX_ISA=scalar|avx2|avx512   the highest level our kernels may use (a cap: a CPU without
//                                   the named level uses its own highest one)
//   ZS_FORCE_SCALAR=1               the same as ZS_MAX_ISA=scalar (kept for old scripts)
// They are Settings::max_isa and Settings::force_scalar ([Note: environment settings] in
// core/settings.h), read once per process at the first call below, like oneDNN's own cap,
// ONEDNN_MAX_CPU_ISA (e.g. AVX2), which oneDNN reads itself for its GEMMs; nn/gemm.h reports what
// it chose. Thread-safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zs {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512bf16 = false;
  bool avx512fp16 = false;
  bool amx_bf16 = false;
  bool avx512vnni = false;  // AVX512_VNNI: vpdpbusd on zmm (Intel Cascade Lake+, AMD Zen 4+)
  bool avx_vnni = false;    // AVX-VNNI: vpdpbusd on ymm without AVX-512 (Intel Alder Lake+)
};

// The features of this CPU (with OS support for the register state), detected once.
const CpuFeatures& cpu_features();
// The detected features as names, e.g. "avx2 f16c fma avx512f avx512bw avx512dq avx512vl
// avx512bf16 avx512vnni" ("none" when there are none).
std::string cpu_features_string();
// The CPU's brand string from cpuid, e.g. "AMD EPYC 9R45" ("unknown" where cpuid has none).
std::string cpu_model_name();

// Levels of the dispatched kernels, lowest first.
//   kScalar  plain C++ (the reference every other level must match bit for bit)
//   kAvx2    AVX2 + F16C, 8 lanes
//   kAvx512  AVX-512 F/BW/DQ/VL (x86-64-v4), 16 lanes, plus AVX-512 BF16 instructions where the
//            CPU has them
enum class SimdLevel : uint8_t { kScalar, kAvx2, kAvx512 };

// "scalar", "avx2", "avx512".
std::string_view simd_level_name(SimdLevel level);
// True when this CPU can run kernels of `level` (kScalar always). Ignores the cap.
bool simd_level_supported(SimdLevel level);
// The cap from the settings ([Note: ISA cap]); kAvx512 when none is set. Throws
// zs::Error(kInvalidArgument) naming the variable, its value and the allowed values when
// ZS_MAX_ISA, or any other setting of Settings::from_environment(), has a value it refuses, so a
// program that calls it at start-up fails before work.
SimdLevel max_simd_level();
// True when the cap is below what this CPU supports (a path is being forced).
bool simd_level_capped();
// True when ZS_FORCE_SCALAR=1. Throws like max_simd_level() for a bad setting.
bool force_scalar();
// The level dispatched kernels use: the highest supported level not above the cap. Fixed for the
// life of the process. Throws like max_simd_level() for a bad setting.
SimdLevel active_simd_level();

// [Note: int8 GEMM support] True when an int8 x int8 matrix product (oneDNN's s8 matmul,
// nn/int8_linear.h) is exact on this process: the CPU has VNNI (vpdpbusd accumulates u8 x s8
// products in 32 bits) and neither cap forbids it: ZS_MAX_ISA leaves kAvx512 active for
// AVX512_VNNI (or at least kAvx2 for AVX-VNNI), and ONEDNN_MAX_CPU_ISA is unset, "ALL", or names a
// level with VNNI (AVX2_VNNI, AVX512_CORE_VNNI, AVX512_CORE_BF16, AVX512_CORE_FP16,
// AVX512_CORE_AMX...; case-insensitive). Without VNNI oneDNN pairs the products in saturating
// 16-bit sums (vpmaddubsw) and full-range int8 weights give wrong results (5-21% of max |y|,
// docs/benchmarks.md), so callers must not use the int8 GEMM there. Throws like
// max_simd_level() for a bad setting.
bool int8_gemm_supported();

}  // namespace zs
