// cpu_adamw against optim::adamw_reference, bit for bit: every path this CPU has (scalar, AVX2,
// AVX-512), 1 and 2 threads, grads fp32/bf16/fp16, out none/fp32/bf16/fp16, sizes around the
// vector widths, data with huge, tiny, subnormal and zero values.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "optim/adamw.h"
#include "optim/cpu_adam.h"
#include "optim/cpu_adam_internal.h"
#include "tests/optim/adam_test_data.h"

namespace zs::optim {
namespace {

using detail::AdamIsa;

struct State {
  std::vector<float> p, m, v;
  std::vector<uint8_t> grad;
};

State make_state(int64_t n, DType grad_dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  State st;
  st.p.resize(n);
  st.m.resize(n);
  st.v.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    st.p[i] = interesting(rng, 0.02f);
    st.m[i] = interesting(rng, 1e-3f);
    st.v[i] = std::abs(interesting(rng, 1e-6f));
  }
  st.grad.resize(n * dtype_size(grad_dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (grad_dtype == DType::kF32) {
      const float g = interesting(rng, 1e-3f);
      std::memcpy(st.grad.data() + 4 * i, &g, 4);
    } else {
      const uint16_t h =
          (i % 7 == 3) ? random_finite_16(rng, grad_dtype)
                       : (grad_dtype == DType::kBF16 ? fp32_to_bf16_bits(interesting(rng, 1e-3f))
                                                     : fp32_to_fp16_bits(interesting(rng, 1e-3f)));
      std::memcpy(st.grad.data() + 2 * i, &h, 2);
    }
  }
  return st;
}

// Runs the reference and `isa` on copies of the same state (at element offset `offset` into the
// buffers, to test unaligned spans) and expects equal bits everywhere.
void expect_bitwise(AdamIsa isa, int threads, int64_t n, DType gd, bool has_out, DType od,
                    const optim::AdamWStep& s, uint32_t seed, int64_t offset = 0) {
  SCOPED_TRACE(testing::Message() << "isa=" << detail::adam_isa_name(isa) << " threads=" << threads
                                  << " n=" << n << " grad=" << dtype_name(gd) << " out="
                                  << (has_out ? dtype_name(od) : "none") << " offset=" << offset);
  const int64_t total = n + offset;
  const State ref = make_state(total, gd, seed);
  State a = ref, b = ref;
  const size_t osz = dtype_size(od);
  std::vector<uint8_t> out_a(total * osz + 1, 0xab), out_b(total * osz + 1, 0xab);
  const size_t gsz = dtype_size(gd);
  void* oa = has_out ? out_a.data() + offset * osz : nullptr;
  void* ob = has_out ? out_b.data() + offset * osz : nullptr;
  optim::adamw_reference(a.p.data() + offset, a.grad.data() + offset * gsz, gd, a.m.data() + offset,
                         a.v.data() + offset, n, s, oa, od);
  detail::cpu_adamw_with(isa, threads, b.p.data() + offset, b.grad.data() + offset * gsz, gd,
                         b.m.data() + offset, b.v.data() + offset, n, s, ob, od);
  int64_t d = first_diff(a.p.data(), b.p.data(), total, 4);
  EXPECT_EQ(d, -1) << "p differs at " << d << ": " << (d >= 0 ? a.p[d] : 0.f) << " vs "
                   << (d >= 0 ? b.p[d] : 0.f);
  d = first_diff(a.m.data(), b.m.data(), total, 4);
  EXPECT_EQ(d, -1) << "m differs at " << d;
  d = first_diff(a.v.data(), b.v.data(), total, 4);
  EXPECT_EQ(d, -1) << "v differs at " << d;
  d = first_diff(out_a.data(), out_b.data(), static_cast<int64_t>(out_a.size()), 1);
  EXPECT_EQ(d, -1) << "out differs at byte " << d;
  EXPECT_EQ(a.grad, b.grad) << "grad must not be written";
}

TEST(CpuAdam, BitwiseEqualsReferenceOnEveryPath) {
  const std::vector<int64_t> sizes = {1, 3, 15, 16, 17, 63, 64, 65, 1000, 100003};
  const DType dts[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (AdamIsa isa : supported_isas()) {
    for (int threads : {1, 2}) {
      for (DType gd : dts) {
        for (int o = 0; o < 4; ++o) {
          const bool has_out = o > 0;
          const DType od = has_out ? dts[o - 1] : DType::kF32;
          for (int64_t n : sizes) {
            expect_bitwise(isa, threads, n, gd, has_out, od, test_step(7, 1.0f / 1024.0f),
                           static_cast<uint32_t>(n * 131 + o * 7 + static_cast<int>(gd)));
            if (testing::Test::HasFailure()) return;  // one clear failure, not thousands
          }
        }
      }
    }
  }
}

TEST(CpuAdam, BitwiseAcrossStepsScalesAndOffsets) {
  // No decay, grad_scale 1 and a huge one, first step (bias corrections far from 1), odd offsets.
  optim::AdamWConfig cfg;
  const optim::AdamWStep steps[] = {
      optim::make_adamw_step(cfg, 1e-3f, 1, 1.0f, false),
      optim::make_adamw_step(cfg, 1e-2f, 1000, 65536.0f, true),
      optim::make_adamw_step(cfg, 6e-4f, 2, 0.37f, true),
  };
  for (AdamIsa isa : supported_isas()) {
    for (const auto& s : steps) {
      for (int64_t offset : {1, 2, 5}) {
        expect_bitwise(isa, 2, 70001, DType::kF32, true, DType::kBF16, s, 11, offset);
        expect_bitwise(isa, 2, 4099, DType::kF16, true, DType::kF16, s, 12, offset);
        expect_bitwise(isa, 1, 333, DType::kBF16, true, DType::kF32, s, 13, offset);
      }
    }
  }
}

TEST(CpuAdam, NonFiniteInputsMatchReference) {
  // NaN and inf in grads and params: the outputs are NaN (or inf) in the same places, and every
  // element that is not NaN has the same bits.
  const int64_t n = 1000;
  for (AdamIsa isa : supported_isas()) {
    for (DType od : {DType::kBF16, DType::kF16, DType::kF32}) {
      State a = make_state(n, DType::kF32, 5);
      auto* g = reinterpret_cast<float*>(a.grad.data());
      for (int64_t i = 0; i < n; i += 17) g[i] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t i = 5; i < n; i += 23) g[i] = -std::numeric_limits<float>::infinity();
      for (int64_t i = 9; i < n; i += 29) a.p[i] = std::numeric_limits<float>::infinity();
      for (int64_t i = 11; i < n; i += 31) a.p[i] = -std::numeric_limits<float>::quiet_NaN();
      State b = a;
      std::vector<uint16_t> oa(2 * n), ob(2 * n);
      const auto s = test_step(3, 0.5f);
      optim::adamw_reference(a.p.data(), a.grad.data(), DType::kF32, a.m.data(), a.v.data(), n, s,
                             oa.data(), od);
      detail::cpu_adamw_with(isa, 1, b.p.data(), b.grad.data(), DType::kF32, b.m.data(), b.v.data(),
                             n, s, ob.data(), od);
      for (int64_t i = 0; i < n; ++i) {
        for (auto [x, y] : {std::pair{a.p[i], b.p[i]}, {a.m[i], b.m[i]}, {a.v[i], b.v[i]}}) {
          ASSERT_EQ(std::isnan(x), std::isnan(y)) << detail::adam_isa_name(isa) << " i=" << i;
          if (!std::isnan(x)) {
            ASSERT_EQ(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(y));
          }
        }
        const float ra = load_as_fp32(oa.data(), od, i), rb = load_as_fp32(ob.data(), od, i);
        ASSERT_EQ(std::isnan(ra), std::isnan(rb)) << detail::adam_isa_name(isa) << " i=" << i;
        if (!std::isnan(ra)) {
          ASSERT_EQ(std::bit_cast<uint32_t>(ra), std::bit_cast<uint32_t>(rb));
        }
      }
    }
  }
}

TEST(CpuAdam, WorkersFollowCallersFlushToZero) {
  // With FTZ/DAZ set on the calling thread, the reference (on this thread) flushes subnormals;
  // the OpenMP workers must do the same.
  // Start the OpenMP pool first: new threads would inherit the caller's MXCSR anyway.
  expect_bitwise(AdamIsa::kScalar, 2, 100003, DType::kF32, false, DType::kF32, test_step(5, 1), 76);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  for (AdamIsa isa : supported_isas()) {
    expect_bitwise(isa, 2, 100003, DType::kF32, true, DType::kBF16, test_step(5, 1.0f), 77);
    expect_bitwise(isa, 2, 100003, DType::kF16, true, DType::kF16, test_step(5, 1e-30f), 78);
  }
  _mm_setcsr(saved);
}

TEST(CpuAdam, OutMayAliasParamsInFp32) {
  const int64_t n = 40000;
  for (AdamIsa isa : supported_isas()) {
    State a = make_state(n, DType::kBF16, 21), b = a;
    const auto s = test_step(4, 1.0f);
    optim::adamw_reference(a.p.data(), a.grad.data(), DType::kBF16, a.m.data(), a.v.data(), n, s,
                           a.p.data(), DType::kF32);
    detail::cpu_adamw_with(isa, 2, b.p.data(), b.grad.data(), DType::kBF16, b.m.data(), b.v.data(),
                           n, s, b.p.data(), DType::kF32);
    EXPECT_EQ(first_diff(a.p.data(), b.p.data(), n, 4), -1) << detail::adam_isa_name(isa);
  }
}

TEST(CpuAdam, PublicEntryPointAndThreads) {
  const int64_t n = 100003;
  State a = make_state(n, DType::kF32, 31), b = a;
  std::vector<uint16_t> oa(n), ob(n);
  const auto s = test_step(2, 0.25f);
  set_cpu_adam_threads(2);
  EXPECT_EQ(cpu_adam_threads(), 2);
  optim::adamw_reference(a.p.data(), a.grad.data(), DType::kF32, a.m.data(), a.v.data(), n, s,
                         oa.data(), DType::kBF16);
  cpu_adamw(b.p.data(), b.grad.data(), DType::kF32, b.m.data(), b.v.data(), n, s, ob.data(),
            DType::kBF16);
  EXPECT_EQ(first_diff(a.p.data(), b.p.data(), n, 4), -1);
  EXPECT_EQ(oa, ob);
  set_cpu_adam_threads(0);
  EXPECT_GE(cpu_adam_threads(), 1);
  // n = 0 is a no-op; bad dtypes are rejected before touching anything.
  cpu_adamw(nullptr, nullptr, DType::kF32, nullptr, nullptr, 0, s, nullptr, DType::kF32);
  EXPECT_THROW(cpu_adamw(b.p.data(), b.grad.data(), DType::kI8, b.m.data(), b.v.data(), n, s,
                         nullptr, DType::kF32),
               zs::Error);
  EXPECT_THROW(cpu_adamw(b.p.data(), b.grad.data(), DType::kF32, b.m.data(), b.v.data(), n, s,
                         ob.data(), DType::kU8),
               zs::Error);
}

TEST(CpuAdam, ActiveIsaFollowsCpuAndEnvironment) {
  const std::string isa = cpu_adam_isa();
  const char* forced = std::getenv("ZS_FORCE_SCALAR");
  const char* cap = std::getenv("ZS_MAX_ISA");
  const bool avx2_cap = cap != nullptr && std::string(cap) == "avx2";
  if (forced != nullptr && std::string(forced) == "1") {
    EXPECT_EQ(isa, "scalar");
  } else if (detail::adam_isa_supported(AdamIsa::kAvx512) && !avx2_cap) {
    EXPECT_EQ(isa, "avx512");
  } else if (detail::adam_isa_supported(AdamIsa::kAvx2)) {
    EXPECT_EQ(isa, "avx2");
  } else {
    EXPECT_EQ(isa, "scalar");
  }
  std::printf("cpu_adam_isa() = %s\n", isa.c_str());
}

}  // namespace
}  // namespace zs::optim
