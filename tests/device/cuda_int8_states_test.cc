// The CUDA int8-state AdamW (gpu::adamw_int8_states, float8 code book) against the CPU reference
// (optim::adamw_int8_states_reference): codes, scales, p and out bit for bit over three steps,
// for several sizes (a partial block, many blocks), blocks, gradient and output dtypes, and
// adversarial blocks (all zero, one huge element, a NaN gradient, tiny values whose v keeps code
// 1). Skips without a device ("no CUDA device").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/state_quant.h"
#include "device/cuda/kernels/ops_kernels.h"
#include "optim/state_adam.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

using test::DeviceArray;

struct State {
  std::vector<float> p, ms, vs;
  std::vector<uint8_t> mc, vc, out;
  std::vector<uint8_t> grad;
};

State make_state(int64_t n, int64_t block, DType gd, DType od, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  State st;
  st.p.resize(n);
  st.grad.resize(static_cast<size_t>(n) * dtype_size(gd));
  for (int64_t i = 0; i < n; ++i) {
    st.p[i] = 0.02f * nd(rng);
    float g = 1e-3f * nd(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 3.0f);
    const int64_t b = i / block;
    if (b == 1) g = 0.0f;                              // an all-zero block
    if (b == 2 && i % block == 5) g = 3e30f;           // one huge element
    if (b == 3 && i % block == 9) g = std::nanf("");   // a NaN gradient
    if (b == 4) g = (i % block == 0) ? 1.0f : 1e-25f;  // v far below the absmax
    store_from_fp32(st.grad.data(), gd, static_cast<size_t>(i), g);
  }
  const int64_t blocks = state_num_blocks(n, block);
  st.ms.assign(blocks, 0.0f);
  st.vs.assign(blocks, 0.0f);
  st.mc.assign(n, 0);
  st.vc.assign(n, 0);
  st.out.assign(static_cast<size_t>(n) * dtype_size(od), 0);
  return st;
}

template <typename T>
void expect_same(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t diff = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      ++diff;
      first = std::min(first, i);
    }
  }
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " differ, first at " << first;
}

TEST(CudaInt8States, BitwiseAgainstCpuReference) {
  ZS_REQUIRE_CUDA();
  const optim::AdamWConfig cfg;
  int cases = 0;
  for (int64_t block : {64, 256, 4096}) {
    for (int64_t n : {int64_t{1}, block - 1, 5 * block, 7 * block + 77, int64_t{100003}}) {
      for (DType gd : {DType::kF32, DType::kBF16, DType::kF16}) {
        const DType od = gd == DType::kF32 ? DType::kBF16 : gd;
        State cpu = make_state(n, block, gd, od, static_cast<uint32_t>(n + block));
        State gpu = cpu;
        DeviceArray<float> p(gpu.p), ms(gpu.ms), vs(gpu.vs);
        DeviceArray<uint8_t> mc(gpu.mc), vc(gpu.vc), out(gpu.out), grad(gpu.grad);
        const optim::Int8StateFormat f{block, StateCode::kFloat8};
        for (int t = 1; t <= 3; ++t) {
          const auto s = optim::make_adamw_step(cfg, 1e-3f, t, 0.5f, true);
          optim::adamw_int8_states_reference(
              cpu.p.data(), cpu.grad.data(), gd, {cpu.mc.data(), cpu.ms.data()},
              {cpu.vc.data(), cpu.vs.data()}, n, f, s, cpu.out.data(), od);
          cuda_check(gpu::adamw_int8_states(p.get(), grad.get(), gd, mc.get(), ms.get(), vc.get(),
                                            vs.get(), n, block, s, out.get(), od, nullptr),
                     "adamw_int8_states");
        }
        SCOPED_TRACE(testing::Message()
                     << "block " << block << " n " << n << " grad " << dtype_name(gd));
        expect_same(cpu.p, p.download(), "p");
        expect_same(cpu.mc, mc.download(), "m codes");
        expect_same(cpu.vc, vc.download(), "v codes");
        expect_same(cpu.ms, ms.download(), "m scales");
        expect_same(cpu.vs, vs.download(), "v scales");
        expect_same(cpu.out, out.download(), "out");
        ++cases;
      }
    }
  }
  std::printf("int8 states (float8) on the GPU: %d cases bitwise equal to the CPU reference\n",
              cases);
}

TEST(CudaInt8States, BadArgumentsAreRefused) {
  ZS_REQUIRE_CUDA();
  const auto s = optim::make_adamw_step(optim::AdamWConfig{}, 1e-3f, 1, 1.0f, true);
  DeviceArray<float> p(64), sc(1);
  DeviceArray<uint8_t> c(64);
  EXPECT_EQ(gpu::adamw_int8_states(p.get(), p.get(), DType::kF32, c.get(), sc.get(), c.get(),
                                   sc.get(), 64, 100, s, nullptr, DType::kF32, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(gpu::adamw_int8_states(p.get(), p.get(), DType::kU8, c.get(), sc.get(), c.get(),
                                   sc.get(), 64, 64, s, nullptr, DType::kF32, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace zs
