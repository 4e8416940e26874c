// Every one of the 2^32 fp32 inputs: each supported vector level narrows to fp16 and bf16 with
// the same bits as the scalar functions. Also checks that the vector paths ignore the MXCSR
// flush-to-zero / denormals-are-zero bits (set by -ffast-math programs).
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <vector>

#include "core/convert.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace zs {
namespace {

std::vector<SimdLevel> vector_levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level_supported(l)) out.push_back(l);
  return out;
}

TEST(ConvertExhaustive, AllFp32InputsMatchScalar) {
  if (vector_levels().empty()) GTEST_SKIP() << "no vector level on this CPU";
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<uint32_t> src(kChunk);
  std::vector<uint16_t> want16(kChunk), wantbf(kChunk), got(kChunk);
  const float* f = reinterpret_cast<const float*>(src.data());
  uint64_t wrong16 = 0, wrongbf = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
    for (size_t i = 0; i < kChunk; ++i) src[i] = static_cast<uint32_t>(base + i);
    convert_at(SimdLevel::kScalar, f, DType::kF32, want16.data(), DType::kF16, kChunk);
    convert_at(SimdLevel::kScalar, f, DType::kF32, wantbf.data(), DType::kBF16, kChunk);
    for (SimdLevel level : vector_levels()) {
      convert_at(level, f, DType::kF32, got.data(), DType::kF16, kChunk);
      for (size_t i = 0; i < kChunk; ++i) {
        if (got[i] != want16[i] && wrong16++ < 5)
          std::printf("fp16 %s: 0x%08x -> 0x%04x, scalar 0x%04x\n",
                      std::string(simd_level_name(level)).c_str(), src[i], got[i], want16[i]);
      }
      convert_at(level, f, DType::kF32, got.data(), DType::kBF16, kChunk);
      for (size_t i = 0; i < kChunk; ++i) {
        if (got[i] != wantbf[i] && wrongbf++ < 5)
          std::printf("bf16 %s: 0x%08x -> 0x%04x, scalar 0x%04x\n",
                      std::string(simd_level_name(level)).c_str(), src[i], got[i], wantbf[i]);
      }
    }
  }
  EXPECT_EQ(wrong16, 0u);
  EXPECT_EQ(wrongbf, 0u);
}

#if defined(__x86_64__) || defined(__i386__)
TEST(ConvertExhaustive, IgnoresFtzDaz) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  std::vector<uint16_t> h(65536), back(65536), want(65536);
  std::vector<float> f(65536);
  std::vector<uint32_t> wide_want(65536), wide_got(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  // fp32 subnormals (first half) and inputs whose fp16 result is subnormal (second half).
  std::vector<float> small(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint32_t sign = (i & 1u) << 31, k = (i >> 1) & 0x7fffu;
    small[i] = std::bit_cast<float>(sign | (i < 32768 ? k * 0x3ffu : 0x32800000u + k * 0x300u));
  }
  int wrong = 0;
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!simd_level_supported(level)) continue;
    convert_at(level, h.data(), DType::kF16, f.data(), DType::kF32, h.size());
    for (uint32_t i = 0; i < 65536; ++i)
      wrong += std::bit_cast<uint32_t>(f[i]) !=
               std::bit_cast<uint32_t>(fp16_bits_to_fp32(static_cast<uint16_t>(i)));
    for (DType d : {DType::kF16, DType::kBF16}) {
      convert_at(level, small.data(), DType::kF32, back.data(), d, small.size());
      for (uint32_t i = 0; i < 65536; ++i) {
        store_from_fp32(want.data(), d, i, small[i]);
        wrong += back[i] != want[i];
      }
    }
  }
  _mm_setcsr(saved);
  EXPECT_EQ(wrong, 0);
}
#endif

}  // namespace
}  // namespace zs
