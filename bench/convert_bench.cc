// Throughput of the bulk conversions at every supported level (not a test; run by hand):
//   convert_bench [elements=16777216] [repeats=20]
// Method: one warm-up pass, then `repeats` timed passes; prints the median in GB/s counted as
// bytes read + bytes written, and in G elements/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/convert.h"

int main(int argc, char** argv) {
  using namespace zs;
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{1} << 24;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  Buffer f32(n * 4, MemCategory::kOther), f32b(n * 4, MemCategory::kOther);
  Buffer h16(n * 2, MemCategory::kOther);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) f32.as<float>()[i] = normal(rng);
  std::printf("%-12s %-10s %-20s %10s %10s\n", "direction", "level", "path", "GB/s", "Gelem/s");
  struct Dir {
    const char* name;
    DType s, d;
  };
  const Dir dirs[] = {{"fp32->bf16", DType::kF32, DType::kBF16},
                      {"bf16->fp32", DType::kBF16, DType::kF32},
                      {"fp32->fp16", DType::kF32, DType::kF16},
                      {"fp16->fp32", DType::kF16, DType::kF32}};
  for (const Dir& dir : dirs) {
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      if (!simd_level_supported(level)) continue;
      const void* src = dir.s == DType::kF32 ? f32.data() : h16.data();
      void* dst = dir.d == DType::kF32 ? f32b.data() : h16.data();
      if (dir.s != DType::kF32) convert(f32.data(), DType::kF32, h16.data(), dir.s, n);
      convert_at(level, src, dir.s, dst, dir.d, n);  // warm-up, first touch
      std::vector<double> secs;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        convert_at(level, src, dir.s, dst, dir.d, n);
        secs.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(secs.begin(), secs.end());
      const double med = secs[secs.size() / 2];
      std::printf("%-12s %-10s %-20s %10.2f %10.3f\n", dir.name,
                  std::string(simd_level_name(level)).c_str(),
                  level == active_simd_level() ? convert_path_name(dir.s, dir.d).c_str() : "",
                  n * 6.0 / med / 1e9, n / med / 1e9);
    }
  }
  return 0;
}
