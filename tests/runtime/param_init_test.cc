// The vector draws of init_param_values against the definition (init_param_values_reference),
// bit for bit ([Note: vector draws] in runtime/param_init.h), and encode_frozen_range against the
// bytes of encode_frozen_record. The binary runs at the CPU's level, under the AVX2 cap (_avx2)
// and the scalar one (_max_isa_scalar): every level must give the reference's bits.
#include "runtime/param_init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "sharding/frozen_layout.h"

namespace zs {
namespace {

std::string level() { return std::string(simd_level_name(active_simd_level())); }

// Compares the two paths on elements [first, first + n); returns the mismatches (and reports the
// first few).
int64_t compare(const Init& init, uint64_t seed, uint32_t unit, uint32_t param, int64_t first,
                int64_t n, int threads = 1) {
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 1);
  init_param_values_reference(init, seed, unit, param, first, n, want.data());
  got.back() = 12345.0f;  // a guard: nothing past n is written
  init_param_values(init, seed, unit, param, first, n, got.data(), threads);
  EXPECT_EQ(got.back(), 12345.0f);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&want[static_cast<size_t>(i)], &got[static_cast<size_t>(i)], 4) != 0) {
      if (++bad <= 3) {
        ADD_FAILURE() << "seed " << seed << " unit " << unit << " param " << param << " element "
                      << first + i << ": " << got[static_cast<size_t>(i)] << " != reference "
                      << want[static_cast<size_t>(i)] << " at level " << level();
      }
    }
  }
  return bad;
}

const Init kInits[] = {
    Init::normal(0.0f, 0.02f),
    Init::normal(0.0f, 1.0f),
    Init::normal(1.0f, 0.5f),
    Init::normal(-3.0f, 1e-6f),
    Init::normal(0.25f, 7.0f),
    Init::normal(0.0f, 1e-30f),
    Init::normal(1e30f, 1e29f),
    Init::uniform(-0.1f, 0.1f),
    Init::uniform(0.0f, 1.0f),
    Init::uniform(-3.0f, 5.0f),
    Init::zeros(),
    Init::ones(),
    Init::constant(-0.75f),
};

// Many keys and inits, ranges at odd offsets (up to 2^40) and of odd lengths, across block
// boundaries (256 elements).
TEST(ParamInit, VectorDrawsEqualReferenceOnManyRanges) {
  const int64_t firsts[] = {
      0, 1, 3, 255, 256, 257, 511, 1000003, (int64_t{1} << 32) - 5, (int64_t{1} << 40) + 13};
  const int64_t lengths[] = {0, 1, 2, 7, 255, 256, 257, 1023, 4099};
  int64_t bad = 0, checked = 0;
  for (const Init& init : kInits) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xdeadbeefcafef00d}}) {
      for (uint32_t unit : {0u, 5u, 4000000000u}) {
        for (uint32_t param : {0u, 3u}) {
          for (int64_t first : firsts) {
            for (int64_t n : lengths) {
              bad += compare(init, seed, unit, param, first, n);
              checked += n;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked << " elements";
}

// Long runs of the normal draws (where the vector path recomputes the rare elements it cannot
// vouch for): 2^23 consecutive elements for each of several keys and scales, 50 million in all.
TEST(ParamInit, VectorDrawsEqualReferenceOnLongRuns) {
  const Init inits[] = {Init::normal(0.0f, 0.02f), Init::normal(0.0f, 1.0f),
                        Init::normal(0.5f, 0.125f)};
  int64_t bad = 0;
  for (const Init& init : inits) {
    for (uint32_t unit : {1u, 77u}) bad += compare(init, 1234, unit, 2, 12345, int64_t{1} << 23);
  }
  EXPECT_EQ(bad, 0);
}

// The values do not depend on the thread count or on how a range is split between calls.
TEST(ParamInit, ThreadsAndSplitsChangeNothing) {
  const Init init = Init::normal(0.0f, 0.02f);
  const int64_t n = 300007, first = 99;
  std::vector<float> one(n);
  init_param_values(init, 9, 1, 2, first, n, one.data(), 1);
  for (int threads : {0, 2, 3, 7}) {
    std::vector<float> t(n);
    init_param_values(init, 9, 1, 2, first, n, t.data(), threads);
    EXPECT_EQ(std::memcmp(one.data(), t.data(), n * sizeof(float)), 0) << threads << " threads";
  }
  std::vector<float> parts(n);
  for (int64_t a = 0; a < n;) {
    const int64_t m = std::min<int64_t>(n - a, 1 + (a * 7919) % 5000);
    init_param_values(init, 9, 1, 2, first + a, m, parts.data() + a, 2);
    a += m;
  }
  EXPECT_EQ(std::memcmp(one.data(), parts.data(), n * sizeof(float)), 0);
  EXPECT_EQ(compare(init, 9, 1, 2, first, n, 3), 0);
}

// encode_frozen_range gives the bytes of encode_frozen_record for any byte range, from the
// values of the rows (int8) or elements (floats) it covers only, at any thread count.
TEST(FrozenRange, EqualsTheWholeRecordsBytes) {
  struct Shape {
    int64_t rows, cols;
    DType storage;
  };
  const Shape shapes[] = {{37, 129, DType::kI8}, {3, 70000, DType::kI8},   {1, 5, DType::kI8},
                          {200, 1, DType::kI8},  {0, 1001, DType::kBF16},  {0, 999, DType::kF32},
                          {0, 513, DType::kF16}, {0, 140001, DType::kBF16}};
  for (const Shape& sh : shapes) {
    FrozenParamDesc d;
    d.numel = sh.rows > 0 ? sh.rows * sh.cols : sh.cols;
    d.rows = sh.rows;
    const FrozenLayout l = compute_frozen_layout(std::span(&d, 1), sh.storage, DType::kBF16, 1);
    const FrozenRecord& r = l.records[0];
    std::vector<float> x(static_cast<size_t>(r.numel));
    init_param_values(Init::normal(0.0f, 0.02f), 5, 1, 0, 0, r.numel, x.data());
    std::vector<uint8_t> whole(static_cast<size_t>(r.bytes));
    encode_frozen_record(x.data(), r, whole.data());
    const int64_t B = r.bytes;
    const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, B},
                                                             {0, 1},
                                                             {B - 1, B},
                                                             {1, B - 1},
                                                             {3, 4 * r.rows + 1},
                                                             {4 * r.rows - 1, 4 * r.rows + 3},
                                                             {B / 3, 2 * B / 3},
                                                             {7, B / 2 + 5},
                                                             {B / 2, B / 2}};
    for (auto [b, e] : ranges) {
      b = std::clamp<int64_t>(b, 0, B);
      e = std::clamp<int64_t>(e, b, B);
      for (int threads : {1, 3}) {
        std::atomic<int64_t> asked{0};
        std::vector<uint8_t> got(static_cast<size_t>(e - b) + 1, 0xab);
        encode_frozen_range(
            r, b, e,
            [&](int64_t first, int64_t n, float* out) {
              ASSERT_TRUE(first >= 0 && first + n <= r.numel);
              asked += n;
              std::copy(x.begin() + first, x.begin() + first + n, out);
            },
            got.data(), threads);
        EXPECT_EQ(got.back(), 0xab) << "wrote past the range";
        EXPECT_EQ(std::memcmp(got.data(), whole.data() + b, static_cast<size_t>(e - b)), 0)
            << "rows " << sh.rows << " cols " << sh.cols << " bytes [" << b << ", " << e << ")";
        // Asked for no more than the rows (elements) the range touches: one more at each end.
        int64_t bound = (e - b) / static_cast<int64_t>(dtype_size(r.dtype)) + 2;
        if (r.dtype == DType::kI8) {
          const int64_t sb = 4 * r.rows;
          const int64_t scale_bytes = std::max<int64_t>(0, std::min(e, sb) - b);
          const int64_t value_bytes = std::max<int64_t>(0, e - std::max(b, sb));
          bound = r.cols * (scale_bytes / 4 + 2 + value_bytes / r.cols + 2);
        }
        EXPECT_LE(asked.load(), bound)
            << "rows " << sh.rows << " cols " << sh.cols << " bytes [" << b << ", " << e << ")";
      }
    }
  }
}

}  // namespace
}  // namespace zs
