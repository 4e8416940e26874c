// optim::sgd_update against PyTorch's SGD (dampening 0, no Nesterov, coupled weight decay),
// computed by hand in double.
#include "optim/sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/convert.h"

namespace zs::optim {
namespace {

TEST(Sgd, MomentumAndWeightDecayMatchHandComputation) {
  const int64_t n = 16;
  SgdConfig cfg{0.9f, 0.01f};
  const float lr = 0.1f;
  std::vector<float> p(n), buf(n, 0.0f), g(n);
  std::vector<double> rp(n), rb(n, 0.0);
  for (int64_t i = 0; i < n; ++i) rp[i] = p[i] = 0.3f * std::sin(static_cast<float>(i));
  for (int t = 1; t <= 5; ++t) {
    for (int64_t i = 0; i < n; ++i) g[i] = 0.05f * std::cos(static_cast<float>(i + 3 * t));
    sgd_update(p.data(), g.data(), DType::kF32, buf.data(), n, cfg, lr, 0.5f, true, nullptr,
               DType::kF32);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i] * 0.5 + 0.01 * rp[i];
      rb[i] = 0.9 * rb[i] + gi;
      rp[i] -= 0.1 * rb[i];
      ASSERT_NEAR(p[i], rp[i], 1e-6) << "t=" << t << " i=" << i;
      ASSERT_NEAR(buf[i], rb[i], 1e-6);
    }
  }
}

TEST(Sgd, NoMomentumLeavesBufferAloneAndNoDecay) {
  SgdConfig cfg{0.0f, 0.5f};
  float p = 1.0f, g = 0.25f;
  // momentum 0: the buffer may be null.
  sgd_update(&p, &g, DType::kF32, nullptr, 1, cfg, 0.1f, 1.0f, /*with_decay=*/false, nullptr,
             DType::kF32);
  EXPECT_FLOAT_EQ(p, 1.0f - 0.1f * 0.25f);
  p = 1.0f;
  sgd_update(&p, &g, DType::kF32, nullptr, 1, cfg, 0.1f, 1.0f, /*with_decay=*/true, nullptr,
             DType::kF32);
  EXPECT_FLOAT_EQ(p, 1.0f - 0.1f * (0.25f + 0.5f * 1.0f));
}

TEST(Sgd, Bf16GradAndOutCopy) {
  SgdConfig cfg{0.9f, 0.0f};
  float p = 1.0f, buf = 0.0f;
  const uint16_t g = fp32_to_bf16_bits(0.5f);
  uint16_t out = 0;
  sgd_update(&p, &g, DType::kBF16, &buf, 1, cfg, 0.25f, 2.0f, true, &out, DType::kBF16);
  EXPECT_FLOAT_EQ(buf, 1.0f);
  EXPECT_FLOAT_EQ(p, 0.75f);
  EXPECT_EQ(out, fp32_to_bf16_bits(0.75f));
}

}  // namespace
}  // namespace zs::optim
