// What the CPU this process runs on can do, detected once at run time, and the vector level the
// run-time dispatched kernels (bulk conversions) use.
//
// Nothing in zeroshard is compiled with a global -march flag: kernels that need AVX2 or AVX-512
// are compiled per function (__attribute__((target(...)))) and chosen here, so one binary runs on
// any x86-64 CPU and uses what it has. On other architectures every feature reads false.
//
// Environment: ZS_FORCE_SCALAR=1 (read once, at the first call of any function below) makes
// active_simd_level() kScalar, so every dispatched kernel takes its scalar path; tests and
// bisecting use it. Thread-safety: all functions may be called concurrently.
#pragma once

#include <cstdint>
#include <string_view>

namespace zs {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bf16 = false;
  bool avx512fp16 = false;
};

// The features of this CPU (with OS support for the register state), detected once.
const CpuFeatures& cpu_features();

// Levels of the dispatched kernels, lowest first.
//   kScalar  plain C++ (the reference every other level must match bit for bit)
//   kAvx2    AVX2 + F16C, 8 lanes
//   kAvx512  AVX-512F, 16 lanes (plus AVX-512 BF16 instructions where the CPU has them)
enum class SimdLevel : uint8_t { kScalar, kAvx2, kAvx512 };

// "scalar", "avx2", "avx512".
std::string_view simd_level_name(SimdLevel level);
// True when this CPU can run kernels of `level` (kScalar always). Ignores ZS_FORCE_SCALAR.
bool simd_level_supported(SimdLevel level);
// True when ZS_FORCE_SCALAR is set to a value other than "" or "0".
bool force_scalar();
// The level dispatched kernels use: the highest supported one, or kScalar under
// ZS_FORCE_SCALAR=1. Fixed for the life of the process.
SimdLevel active_simd_level();

}  // namespace zs
