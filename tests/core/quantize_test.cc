#include "core/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace zs {
namespace {

TEST(Quantize, UnitScaleRoundsHalfToEven) {
  EXPECT_EQ(quantize_int8_value(3.14159265f), 3);
  EXPECT_EQ(quantize_int8_value(-3.14159265f), -3);
  EXPECT_EQ(quantize_int8_value(2.5f), 2);
  EXPECT_EQ(quantize_int8_value(3.5f), 4);
  EXPECT_EQ(quantize_int8_value(-0.5f), 0);
  EXPECT_EQ(quantize_int8_value(0.49999997f), 0);  // v + 0.5 would round up to 1: must not
  EXPECT_EQ(quantize_int8_value(126.5f), 126);
  EXPECT_EQ(quantize_int8_value(126.50001f), 127);
  EXPECT_EQ(quantize_int8_value(1000.0f), 127);
  EXPECT_EQ(quantize_int8_value(-1000.0f), -127);
  EXPECT_EQ(quantize_int8_value(-std::numeric_limits<float>::infinity()), -127);
  EXPECT_EQ(quantize_int8_value(std::numeric_limits<float>::quiet_NaN()), 0);
  const float x[] = {3.14159265f, -2.71828f, 0.0f, 200.0f};
  int8_t q[4];
  quantize_int8_unit(x, 4, q);
  EXPECT_EQ(q[0], 3);
  EXPECT_EQ(q[1], -3);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 127);
}

// Random blocks over many magnitudes (and a short last block): the bound of quantize.h holds,
// each block's largest magnitude maps to +-127, nothing is -128.
TEST(Quantize, BlockwiseErrorBoundOnRandomData) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-140, 120);
  const size_t block = 64, n = 64 * 997 + 13;
  std::vector<float> x(n), back(n);
  for (size_t b = 0; b * block < n; ++b) {
    const float mag = std::ldexp(1.0f, expo(rng));
    for (size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) x[i] = normal(rng) * mag;
  }
  const size_t nb = quantize_num_blocks(n, block);
  ASSERT_EQ(nb, 998u);
  std::vector<int8_t> q(n);
  std::vector<float> scales(nb);
  quantize_int8_blockwise(x.data(), n, block, q.data(), scales.data());
  dequantize_int8_blockwise(q.data(), scales.data(), n, block, back.data());
  double worst = 0;  // max |x - x'| / scale
  for (size_t b = 0; b < nb; ++b) {
    const size_t begin = b * block, end = std::min(n, begin + block);
    float absmax = 0;
    size_t arg = begin;
    for (size_t i = begin; i < end; ++i)
      if (std::fabs(x[i]) > absmax) absmax = std::fabs(x[i]), arg = i;
    ASSERT_GT(scales[b], 0.0f);
    if (scales[b] >= std::numeric_limits<float>::min()) {
      EXPECT_EQ(std::abs(q[arg]), 127) << "block " << b;
      EXPECT_EQ(q[arg] > 0, x[arg] > 0);
    }
    for (size_t i = begin; i < end; ++i) {
      ASSERT_GE(q[i], -127);
      const double err = std::fabs(static_cast<double>(x[i]) - back[i]) / scales[b];
      worst = std::max(worst, err);
      ASSERT_LE(err, 0.5 + std::ldexp(1.0, -15)) << "block " << b << " i " << i;
    }
  }
  std::printf("max |x - dequant| / scale = %.9f\n", worst);
}

TEST(Quantize, AbsmaxMapsTo127AndZeroBlock) {
  const float x[] = {0.5f, -2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.0f, 7.0f};
  int8_t q[9];
  float s[3];
  quantize_int8_blockwise(x, 9, 4, q, s);
  EXPECT_FLOAT_EQ(s[0], 2.0f / 127.0f);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[0], 32);  // 0.5 * 127 / 2 = 31.75
  EXPECT_EQ(q[2], 64);  // 63.5 -> even
  EXPECT_EQ(s[1], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(q[8], 127);  // short last block of one element
  EXPECT_FLOAT_EQ(s[2], 7.0f / 127.0f);
  float back[9];
  dequantize_int8_blockwise(q, s, 9, 4, back);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(Quantize, TinyAndNonFiniteBlocks) {
  // absmax in the subnormal range: scale rounded up, bound still holds.
  const float tiny[] = {std::ldexp(190.0f, -149), std::ldexp(-3.0f, -149), std::ldexp(1.0f, -149)};
  int8_t q[3];
  float s;
  quantize_int8_blockwise(tiny, 3, 3, q, &s);
  float back[3];
  dequantize_int8_blockwise(q, &s, 3, 3, back);
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(tiny[i] - back[i]), s / 2) << i;
  // inf or NaN: scale NaN, q 0, dequantized NaN.
  const float bad[] = {1.0f, std::numeric_limits<float>::infinity(), 2.0f, 3.0f};
  int8_t qb[4];
  float sb[2];
  quantize_int8_blockwise(bad, 4, 2, qb, sb);
  EXPECT_TRUE(std::isnan(sb[0]));
  EXPECT_EQ(qb[0], 0);
  EXPECT_EQ(qb[1], 0);
  EXPECT_EQ(qb[3], 127);
  float bb[4];
  dequantize_int8_blockwise(qb, sb, 4, 2, bb);
  EXPECT_TRUE(std::isnan(bb[0]));
  EXPECT_FLOAT_EQ(bb[3], 3.0f);
}

// The vectorized block quantization against its definition, element by element:
// scale = block_scale, q = quantize_int8_value(x / scale). Rows of random magnitudes, rows built
// of exact ties (k + 0.5) * scale of both signs, subnormal and huge rows, odd lengths.
TEST(Quantize, BlockwiseMatchesElementwiseDefinition) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> half(-127, 126);
  for (size_t cols : {1u, 2u, 7u, 15u, 16u, 17u, 63u, 64u, 65u, 257u, 4099u}) {
    for (int kind = 0; kind < 5; ++kind) {
      const size_t rows = 9;
      std::vector<float> x(rows * cols);
      for (size_t r = 0; r < rows; ++r) {
        const float mag = kind == 0   ? std::ldexp(1.0f, static_cast<int>(r) * 3 - 12)
                          : kind == 3 ? 1e-40f
                          : kind == 4 ? 3e38f
                                      : 1.0f;
        for (size_t c = 0; c < cols; ++c) {
          float v = mag * normal(rng);
          if (kind == 1 || kind == 2) {  // ties: (k + 1/2) * s, and the row's max at 127 * s
            const float s = kind == 1 ? 0.01f : 3.0f;
            v = c == 0 ? 127.0f * s : (static_cast<float>(half(rng)) + 0.5f) * s;
          }
          if (kind == 4) v = std::clamp(v, -3.4e38f, 3.4e38f);
          x[r * cols + c] = v;
        }
      }
      std::vector<int8_t> q(x.size());
      std::vector<float> scales(rows);
      quantize_int8_rows(x.data(), rows, cols, q.data(), scales.data());
      for (size_t r = 0; r < rows; ++r) {
        std::vector<int8_t> one(cols);
        float scale1 = 0.0f;
        quantize_int8_blockwise(x.data() + r * cols, cols, cols, one.data(), &scale1);
        ASSERT_EQ(std::memcmp(&scale1, &scales[r], 4), 0);
        for (size_t c = 0; c < cols; ++c) {
          const int8_t want =
              scales[r] > 0.0f ? quantize_int8_value(x[r * cols + c] / scales[r]) : int8_t{0};
          ASSERT_EQ(q[r * cols + c], want)
              << "cols " << cols << " kind " << kind << " row " << r << " col " << c << " x "
              << x[r * cols + c] << " scale " << scales[r] << " at "
              << simd_level_name(active_simd_level());
        }
      }
    }
  }
}

TEST(Quantize, ZeroBlockSizeThrows) {
  float x = 1;
  int8_t q;
  float s;
  EXPECT_THROW(quantize_int8_blockwise(&x, 1, 0, &q, &s), Error);
  EXPECT_THROW(quantize_num_blocks(1, 0), Error);
  EXPECT_EQ(quantize_num_blocks(0, 8), 0u);
  EXPECT_EQ(quantize_num_blocks(17, 8), 3u);
}

// ---- Row-wise API (quantize_int8_rows / dequantize_int8_rows) ----

constexpr float kMaxF = std::numeric_limits<float>::max();
constexpr float kMinSub = std::numeric_limits<float>::denorm_min();  // 2^-149

// Quantizes `rows` x `cols` row-wise, dequantizes to fp32, and checks each element against the
// bound of quantize.h, that -128 never appears and that quantize_int8_rows equals the block-wise
// call with block = cols. Returns the worst |x - x'| / scale.
double check_rows_round_trip(const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<int8_t> q(rows * cols), qb(rows * cols);
  std::vector<float> s(rows), sb(rows), back(rows * cols);
  quantize_int8_rows(x.data(), rows, cols, q.data(), s.data());
  quantize_int8_blockwise(x.data(), rows * cols, cols, qb.data(), sb.data());
  EXPECT_EQ(q, qb);
  EXPECT_EQ(0, std::memcmp(s.data(), sb.data(), rows * sizeof(float)));
  dequantize_int8_rows(q.data(), s.data(), rows, cols, back.data(), DType::kF32);
  double worst = 0;
  for (size_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(std::isfinite(s[r]) && s[r] >= 0.0f) << "row " << r << " scale " << s[r];
    for (size_t j = 0; j < cols; ++j) {
      const size_t i = r * cols + j;
      EXPECT_GE(q[i], -127) << "row " << r << " col " << j;
      EXPECT_TRUE(std::isfinite(back[i])) << "row " << r << " col " << j << " x " << x[i];
      const double err = std::fabs(static_cast<double>(x[i]) - static_cast<double>(back[i]));
      const double bound = static_cast<double>(s[r]) * (0.5 + std::ldexp(1.0, -15));
      EXPECT_LE(err, bound) << "row " << r << " col " << j << " x " << x[i] << " q " << int{q[i]}
                            << " scale " << s[r];
      if (s[r] > 0) worst = std::max(worst, err / s[r]);
    }
  }
  return worst;
}

// Adversarial rows, one matrix of odd width: constant rows of both signs, an outlier among small
// values, zeros (signed), subnormal rows (the smallest subnormal; absmax / 127 subnormal),
// +-FLT_MAX.
TEST(QuantizeRows, AdversarialRowsKeepTheBound) {
  const size_t cols = 37;
  std::vector<std::vector<float>> rows;
  auto fill = [&](auto f) {
    std::vector<float> r(cols);
    for (size_t j = 0; j < cols; ++j) r[j] = f(j);
    rows.push_back(r);
  };
  fill([](size_t) { return 0.3f; });                                 // 0: all equal, positive
  fill([](size_t) { return -5.5f; });                                // 1: all equal, negative
  fill([](size_t j) { return j == 17 ? 1e30f : 1e-3f * (j % 5); });  // 2: one huge outlier
  fill([](size_t j) { return j % 2 ? -0.0f : 0.0f; });               // 3: zeros
  fill([](size_t) { return kMinSub; });                              // 4: smallest subnormal
  fill([](size_t j) { return j % 3 ? -kMinSub : kMinSub; });         // 5: +-smallest subnormal
  fill([](size_t j) { return std::ldexp(static_cast<float>(j) - 18.0f, -125); });  // 6: scale
  fill([](size_t j) { return std::ldexp(static_cast<float>(j), -140); });          //   7: subnormal
  fill([](size_t j) { return j % 2 ? -kMaxF : kMaxF; });                           // 8: +-FLT_MAX
  fill([](size_t j) { return j == 0 ? kMaxF : j == 1 ? -kMaxF : 1.0f * j; });      // 9: max + small
  fill([](size_t j) { return j == 3 ? -1e30f : 1e-30f; });  // 10: negative outlier
  const size_t n = rows.size();
  std::vector<float> x;
  for (const auto& r : rows) x.insert(x.end(), r.begin(), r.end());
  const double worst = check_rows_round_trip(x, n, cols);
  std::printf("adversarial rows: max |x - dequant| / scale = %.9f\n", worst);

  std::vector<int8_t> q(n * cols);
  std::vector<float> s(n);
  quantize_int8_rows(x.data(), n, cols, q.data(), s.data());
  EXPECT_EQ(s[0], 0.3f / 127.0f);
  EXPECT_EQ(s[1], 5.5f / 127.0f);
  for (size_t j = 0; j < cols; ++j) {
    EXPECT_EQ(q[0 * cols + j], 127);
    EXPECT_EQ(q[1 * cols + j], -127);
    EXPECT_EQ(q[2 * cols + j], j == 17 ? 127 : 0);  // the small values vanish next to 1e30
    EXPECT_EQ(q[3 * cols + j], 0);
    EXPECT_EQ(q[4 * cols + j], 1);  // scale 2^-149: the value itself
    EXPECT_EQ(q[8 * cols + j], j % 2 ? -127 : 127);
  }
  EXPECT_EQ(s[3], 0.0f);
  EXPECT_EQ(s[4], kMinSub);
  EXPECT_GT(s[6], 0.0f);
  EXPECT_LT(s[6], std::numeric_limits<float>::min());  // absmax / 127 is subnormal
  EXPECT_EQ(std::abs(q[6 * cols + 0]), 127);           // ... and still exact enough for 127
  // The +-FLT_MAX rows dequantize to finite values (127 * scale does not overflow).
  std::vector<float> back(n * cols);
  dequantize_int8_rows(q.data(), s.data(), n, cols, back.data(), DType::kF32);
  EXPECT_TRUE(std::isfinite(back[8 * cols]));
  EXPECT_EQ(back[3 * cols + 1], 0.0f);
}

// Random rows over the whole exponent range (subnormal to near FLT_MAX) at odd sizes.
TEST(QuantizeRows, RandomRowsKeepTheBound) {
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-149, 124);
  for (auto [rows, cols] : {std::pair<size_t, size_t>{7, 129}, {1, 1}, {13, 3}, {301, 65}}) {
    std::vector<float> x(rows * cols);
    for (size_t r = 0; r < rows; ++r) {
      const float mag = std::ldexp(1.0f, expo(rng));
      for (size_t j = 0; j < cols; ++j) x[r * cols + j] = normal(rng) * mag;
    }
    check_rows_round_trip(x, rows, cols);
  }
}

TEST(QuantizeRows, EmptyShapes) {
  float s[3] = {1, 1, 1};
  quantize_int8_rows(nullptr, 3, 0, nullptr, s);
  for (float v : s) EXPECT_EQ(v, 0.0f);
  quantize_int8_rows(nullptr, 0, 5, nullptr, nullptr);
  dequantize_int8_rows(nullptr, nullptr, 0, 5, nullptr, DType::kBF16);
  dequantize_int8_rows(nullptr, s, 3, 0, nullptr, DType::kF16);
}

TEST(QuantizeRows, DequantizeRefusesNonFloatOutput) {
  const int8_t q = 1;
  const float s = 1.0f;
  uint64_t out = 0;
  for (DType dt : {DType::kI8, DType::kU8, DType::kF64}) {
    EXPECT_THROW(dequantize_int8_rows(&q, &s, 1, 1, &out, dt), Error) << dtype_name(dt);
    EXPECT_THROW(dequantize_int8_rows(nullptr, nullptr, 0, 0, nullptr, dt), Error);
  }
}

// dequantize_int8_rows against the scalar reference convert(q * scale, fp32 -> dtype), element by
// element, for every output dtype. The scales cover fp16 overflow (inf), bf16/fp16 subnormals,
// NaN, zero and ordinary values; the sizes cross the vector widths and the 2048-element tile.
TEST(QuantizeRows, DequantizeMatchesScalarReference) {
  std::printf("simd level %s\n", std::string(simd_level_name(active_simd_level())).c_str());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> qdist(-127, 127);
  std::uniform_int_distribution<int> expo(-149, 120);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  const float special[] = {
      0.0f,           1.0f,  1000.0f,        kMinSub,
      1e-40f,         1e-7f, kMaxF / 127.0f, std::numeric_limits<float>::quiet_NaN(),
      65504.0f / 127, 3e-8f};
  const std::pair<size_t, size_t> shapes[] = {{7, 129}, {1, 1}, {3, 2049}, {5, 4100}, {33, 17}};
  for (auto [rows, cols] : shapes) {
    std::vector<int8_t> q(rows * cols);
    std::vector<float> s(rows);
    for (auto& v : q) v = static_cast<int8_t>(qdist(rng));
    for (size_t r = 0; r < rows; ++r)
      s[r] = r < std::size(special) && rows > 1 ? special[r] : std::ldexp(mant(rng), expo(rng));
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      const size_t es = dtype_size(dt);
      std::vector<unsigned char> got(rows * cols * es, 0xAB), want(rows * cols * es, 0xCD);
      dequantize_int8_rows(q.data(), s.data(), rows, cols, got.data(), dt);
      for (size_t i = 0; i < rows * cols; ++i) {
        const float p = static_cast<float>(q[i]) * s[i / cols];
        convert(&p, DType::kF32, want.data() + i * es, dt, 1);
      }
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < rows * cols; ++i)
        if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0 && wrong++ == 0)
          first = i;
      EXPECT_EQ(wrong, 0u) << rows << "x" << cols << " " << dtype_name(dt) << " first at " << first
                           << " q " << int{q[first]} << " scale " << s[first / cols];
    }
  }
}

}  // namespace
}  // namespace zs
