// Conversions fp32 <-> fp16/bf16: known values, the fp16 round trip over all 2^16 patterns, and
// bitwise agreement of every supported vector level with the scalar functions.
#include "core/convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"

namespace zs {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level_supported(l)) out.push_back(l);
  return out;
}

TEST(ConvertKnownValues, Pi) {
  EXPECT_EQ(fp32_to_fp16_bits(3.14159265f), 0x4248);
  EXPECT_EQ(fp32_to_bf16_bits(3.14159265f), 0x4049);
  EXPECT_EQ(fp16_bits_to_fp32(0x4248), 3.140625f);
  EXPECT_EQ(bf16_bits_to_fp32(0x4049), 3.140625f);
}

TEST(ConvertKnownValues, Fp16Range) {
  EXPECT_EQ(fp32_to_fp16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(fp16_bits_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp32_to_fp16_bits(65519.99f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(fp32_to_fp16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16_bits(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 units: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16_bits(std::ldexp(1.0f, -149)), 0x0000);
  EXPECT_EQ(fp32_to_fp16_bits(-std::ldexp(1.0f, -149)), 0x8000);
  EXPECT_EQ(fp16_bits_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_bits_to_fp32(0x03ff), std::ldexp(1023.0f, -24));
}

TEST(ConvertKnownValues, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp32_to_fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bits(fp16_bits_to_fp32(0x8000)), 0x80000000u);
  EXPECT_EQ(bits(bf16_bits_to_fp32(0x8000)), 0x80000000u);
  EXPECT_EQ(fp32_to_fp16_bits(inf), 0x7c00);
  EXPECT_EQ(fp32_to_fp16_bits(-inf), 0xfc00);
  EXPECT_EQ(fp32_to_bf16_bits(inf), 0x7f80);
  EXPECT_EQ(fp32_to_bf16_bits(-inf), 0xff80);
  EXPECT_EQ(fp16_bits_to_fp32(0x7c00), inf);
  EXPECT_EQ(bf16_bits_to_fp32(0xff80), -inf);
  // NaN: quiet, sign kept; a signalling NaN whose payload lies below bit 13/16 stays NaN.
  EXPECT_EQ(fp32_to_fp16_bits(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(fp32_to_fp16_bits(from_bits(0xff800001u)), 0xfe00);
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0xffffffffu)), 0xffff);
  EXPECT_TRUE(std::isnan(fp16_bits_to_fp32(0x7c01)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_fp32(0xff81)));
}

TEST(ConvertKnownValues, Bf16TiesToEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 (0x3f80, even) and 1 + 2^-7 (0x3f81): goes to 0x3f80.
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x3f808000u)), 0x3f80);
  // 1 + 3*2^-8 is halfway between 0x3f81 (odd) and 0x3f82: goes to 0x3f82.
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x3f818000u)), 0x3f82);
  // Just above / below a tie.
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x3f817fffu)), 0x3f81);
  // Largest finite fp32 rounds up to inf; bf16 subnormals are kept.
  EXPECT_EQ(fp32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(fp32_to_bf16_bits(from_bits(0x00008000u)), 0x0000);
}

// Every fp16 pattern survives fp16 -> fp32 -> fp16 bitwise; NaNs come back quiet with their sign
// and payload. Checked for the scalar functions and for every supported bulk level.
TEST(ConvertRoundTrip, AllFp16Patterns) {
  std::vector<uint16_t> h(65536), back(65536);
  std::vector<float> f(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  auto expected = [](uint16_t x) {
    const bool nan = (x & 0x7c00) == 0x7c00 && (x & 0x3ff) != 0;
    return nan ? static_cast<uint16_t>(x | 0x0200) : x;
  };
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t x = static_cast<uint16_t>(i);
    ASSERT_EQ(fp32_to_fp16_bits(fp16_bits_to_fp32(x)), expected(x)) << std::hex << i;
  }
  for (SimdLevel level : supported_levels()) {
    SCOPED_TRACE(simd_level_name(level));
    convert_at(level, h.data(), DType::kF16, f.data(), DType::kF32, h.size());
    convert_at(level, f.data(), DType::kF32, back.data(), DType::kF16, f.size());
    int wrong = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      wrong += bits(f[i]) != bits(fp16_bits_to_fp32(h[i]));
      wrong += back[i] != expected(h[i]);
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(ConvertRoundTrip, AllBf16Patterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t x = static_cast<uint16_t>(i);
    const bool nan = (x & 0x7f80) == 0x7f80 && (x & 0x7f) != 0;
    ASSERT_EQ(fp32_to_bf16_bits(bf16_bits_to_fp32(x)), nan ? (x | 0x40) : x) << std::hex << i;
  }
}

// Random bit patterns: every fp32 class (normals, subnormals, zeros, infs, quiet and signalling
// NaNs) with extra weight on the fp16 rounding boundaries.
std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    switch (rng() % 8) {
      case 0:
        u &= 0x807fffffu;
        break;  // zero / subnormal
      case 1:
        u |= 0x7f800000u;
        break;  // inf / NaN
      case 2:
        u = (u & 0x80000000u) | 0x7f800000u;
        break;  // inf
      case 3:
        u = (u & 0x83ffffffu) | 0x38000000u;
        break;  // near fp16 subnormals
      case 4:
        u = (u & 0x80001fffu) | 0x47000000u | (u & 0x7fe000u);
        break;  // near 65504
      case 5:
        u = (u & 0xffff0000u) | ((u & 1) ? 0x8000u : 0x1000u);
        break;  // bf16 ties, near
      default:
        break;  // anything
    }
    v[i] = from_bits(u);
  }
  return v;
}

TEST(ConvertBulk, VectorLevelsMatchScalarBitwise) {
  const std::vector<float> src = random_floats(1000003, 42);
  std::vector<uint16_t> h16(src.size());
  for (size_t i = 0; i < src.size(); ++i) h16[i] = static_cast<uint16_t>(bits(src[i]) >> 7);
  for (SimdLevel level : supported_levels()) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{15}, size_t{16}, size_t{17},
                     size_t{31}, size_t{33}, size_t{1000}, size_t{1000003}}) {
      SCOPED_TRACE(testing::Message() << simd_level_name(level) << " n=" << n);
      for (DType d : {DType::kF16, DType::kBF16}) {
        std::vector<uint16_t> got(n + 1, 0xabcd), want(n + 1, 0xabcd);
        convert_at(level, src.data(), DType::kF32, got.data(), d, n);
        for (size_t i = 0; i < n; ++i) store_from_fp32(want.data(), d, i, src[i]);
        // Count mismatches (printing a 1M-element vector helps nobody); [n] is a sentinel the
        // kernel must not touch.
        size_t wrong_narrow = 0, first = n + 1;
        for (size_t i = 0; i <= n; ++i)
          if (got[i] != want[i] && wrong_narrow++ == 0) first = i;
        EXPECT_EQ(wrong_narrow, 0u) << dtype_name(d) << " first at " << first << " input 0x"
                                    << std::hex << (first < n ? bits(src[first]) : 0u);
        std::vector<float> wide(n + 1, 7.0f);
        convert_at(level, h16.data(), d, wide.data(), DType::kF32, n);
        int wrong = wide[n] != 7.0f;
        for (size_t i = 0; i < n; ++i)
          wrong += bits(wide[i]) != bits(load_as_fp32(h16.data(), d, i));
        EXPECT_EQ(wrong, 0) << dtype_name(d) << " -> fp32";
      }
    }
  }
}

TEST(ConvertBulk, Fp16Bf16CrossConversion) {
  const size_t n = 5000;  // more than one internal chunk
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>(i * 13u + (i >> 3) * 4099u);
  for (SimdLevel level : supported_levels()) {
    for (auto [s, d] :
         {std::pair{DType::kF16, DType::kBF16}, std::pair{DType::kBF16, DType::kF16}}) {
      std::vector<uint16_t> got(n), want(n);
      convert_at(level, h.data(), s, got.data(), d, n);
      for (size_t i = 0; i < n; ++i)
        store_from_fp32(want.data(), d, i, load_as_fp32(h.data(), s, i));
      EXPECT_EQ(got, want) << simd_level_name(level);
    }
  }
}

TEST(ConvertBulk, PublicEntryPointsMatchScalar) {
  const std::vector<float> src = random_floats(4099, 7);
  std::vector<uint16_t> a(src.size()), b(src.size());
  fp32_to_fp16(src.data(), a.data(), src.size());
  convert_at(SimdLevel::kScalar, src.data(), DType::kF32, b.data(), DType::kF16, src.size());
  EXPECT_EQ(a, b);
  fp32_to_bf16(src.data(), a.data(), src.size());
  convert(src.data(), DType::kF32, b.data(), DType::kBF16, src.size());
  EXPECT_EQ(a, b);
  std::vector<float> w1(a.size()), w2(a.size());
  bf16_to_fp32(a.data(), w1.data(), a.size());
  fp16_to_fp32(a.data(), w2.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(bits(w1[i]), bits(bf16_bits_to_fp32(a[i])));
    ASSERT_EQ(bits(w2[i]), bits(fp16_bits_to_fp32(a[i])));
  }
}

TEST(ConvertBulk, RejectsIntegerDtypes) {
  float f = 0;
  int8_t q = 0;
  EXPECT_THROW(convert(&f, DType::kF32, &q, DType::kI8, 1), Error);
  EXPECT_THROW(convert_path_name(DType::kU8, DType::kF32), Error);
}

TEST(ConvertDispatch, PathNamesAndForceScalar) {
  const CpuFeatures& f = cpu_features();
  std::printf("cpu: avx2=%d f16c=%d avx512f=%d avx512bf16=%d avx512fp16=%d; level %s\n", f.avx2,
              f.f16c, f.avx512f, f.avx512bf16, f.avx512fp16,
              std::string(simd_level_name(active_simd_level())).c_str());
  std::printf("paths: fp32->bf16 %s, fp32->fp16 %s, bf16->fp32 %s, fp16->bf16 %s\n",
              convert_path_name(DType::kF32, DType::kBF16).c_str(),
              convert_path_name(DType::kF32, DType::kF16).c_str(),
              convert_path_name(DType::kBF16, DType::kF32).c_str(),
              convert_path_name(DType::kF16, DType::kBF16).c_str());
  EXPECT_EQ(convert_path_name(DType::kF32, DType::kF32), "copy");
  const char* env = std::getenv("ZS_FORCE_SCALAR");
  const char* cap = std::getenv("ZS_MAX_ISA");
  const std::string cap_s = cap != nullptr ? cap : "";
  // ZS_FORCE_SCALAR=1 wins over any cap (a suite run under ZS_MAX_ISA=avx2 sets both).
  if (cap_s == "scalar" || (env != nullptr && std::string(env) == "1")) {
    EXPECT_EQ(max_simd_level(), SimdLevel::kScalar);
    EXPECT_EQ(active_simd_level(), SimdLevel::kScalar);
    EXPECT_EQ(convert_path_name(DType::kF32, DType::kBF16), "scalar");
    EXPECT_EQ(convert_path_name(DType::kF16, DType::kBF16), "scalar>scalar");
  } else if (cap_s == "avx2" && simd_level_supported(SimdLevel::kAvx2)) {
    // [Note: ISA cap] a cap below the CPU's best level is taken, whatever the CPU has above it.
    EXPECT_EQ(max_simd_level(), SimdLevel::kAvx2);
    EXPECT_EQ(active_simd_level(), SimdLevel::kAvx2);
    EXPECT_EQ(simd_level_capped(), simd_level_supported(SimdLevel::kAvx512));
    EXPECT_EQ(convert_path_name(DType::kF32, DType::kBF16), "avx2+f16c");
    EXPECT_EQ(convert_path_name(DType::kF16, DType::kF32), "avx2+f16c");
  } else {
    EXPECT_FALSE(force_scalar());
    if (simd_level_supported(SimdLevel::kAvx512)) {
      EXPECT_EQ(active_simd_level(), SimdLevel::kAvx512);
      EXPECT_EQ(convert_path_name(DType::kF32, DType::kBF16),
                f.avx512bf16 ? "avx512bf16" : "avx512f");
      EXPECT_EQ(convert_path_name(DType::kF16, DType::kF32), "avx512f");
    }
  }
  EXPECT_TRUE(simd_level_supported(SimdLevel::kScalar));
  float x = 1.0f;
  uint16_t y = 0;
  for (SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!simd_level_supported(l)) {
      EXPECT_THROW(convert_at(l, &x, DType::kF32, &y, DType::kF16, 1), Error);
    }
  }
}

}  // namespace
}  // namespace zs
