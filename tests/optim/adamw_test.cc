// optim::adamw_reference against hand computations in double: the implementation's formula and
// PyTorch's published AdamW algorithm (torch.optim.AdamW docs), over several steps.
#include "optim/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/convert.h"

namespace zs::optim {
namespace {

struct Ref {
  double p, m = 0, v = 0;
};

// PyTorch's published algorithm (decoupled weight decay, bias-corrected moments):
//   theta <- theta - lr * wd * theta
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
//   theta <- theta - lr * m_hat / (sqrt(v_hat) + eps)
void torch_published_step(Ref& r, double g, double lr, double b1, double b2, double eps, double wd,
                          int t) {
  r.p -= lr * wd * r.p;
  r.m = b1 * r.m + (1 - b1) * g;
  r.v = b2 * r.v + (1 - b2) * g * g;
  const double m_hat = r.m / (1 - std::pow(b1, t));
  const double v_hat = r.v / (1 - std::pow(b2, t));
  r.p -= lr * m_hat / (std::sqrt(v_hat) + eps);
}

// The implementation's form ([Note: AdamW operation order]) in double.
void note_form_step(Ref& r, double g, double lr, double b1, double b2, double eps, double wd,
                    int t) {
  const double step_size = lr / (1 - std::pow(b1, t));
  const double bias2_sqrt = std::sqrt(1 - std::pow(b2, t));
  r.p *= 1 - lr * wd;
  // 1 - beta as the fp32 step computes it (1.0f - 0.9f is 0.100000024f).
  r.m = r.m * b1 + g * static_cast<double>(1.0f - static_cast<float>(b1));
  r.v = r.v * b2 + (g * g) * static_cast<double>(1.0f - static_cast<float>(b2));
  r.p -= step_size * (r.m / (std::sqrt(r.v) / bias2_sqrt + eps));
}

struct Case {
  float lr, wd, b1, b2, eps;
  bool with_decay;
};

void run_case(const Case& c, bool published) {
  const int64_t n = 64;
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f), g(n);
  std::vector<Ref> ref(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = 0.05f * std::sin(0.7f * static_cast<float>(i) + 0.1f);
    ref[i].p = p[i];
  }
  AdamWConfig cfg{c.b1, c.b2, c.eps, c.wd};
  double max_rel = 0;
  for (int t = 1; t <= 6; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      g[i] = 1e-2f * std::cos(1.3f * static_cast<float>(i * t)) + (i % 5 == 0 ? 0.0f : 1e-4f);
    }
    const AdamWStep s = make_adamw_step(cfg, c.lr, t, 1.0f, c.with_decay);
    adamw_reference(p.data(), g.data(), DType::kF32, m.data(), v.data(), n, s, nullptr,
                    DType::kF32);
    const double wd = c.with_decay ? c.wd : 0.0;
    for (int64_t i = 0; i < n; ++i) {
      if (published) {
        torch_published_step(ref[i], g[i], c.lr, c.b1, c.b2, c.eps, wd, t);
      } else {
        note_form_step(ref[i], g[i], c.lr, c.b1, c.b2, c.eps, wd, t);
      }
      const double rel = std::abs(p[i] - ref[i].p) / std::max(1e-12, std::abs(ref[i].p));
      max_rel = std::max(max_rel, rel);
      // Tolerances in units of the terms' sizes (m and p may cancel to small values): fp32
      // rounding of each step, a few ulps of the gradient (1e-2) and of the update (lr).
      const double tol_p = 2e-6 * std::abs(ref[i].p) + (published ? 1e-4 : 1e-5) * c.lr;
      ASSERT_NEAR(p[i], ref[i].p, tol_p) << "t=" << t << " i=" << i;
      ASSERT_NEAR(m[i], ref[i].m, (published ? 1e-8 : 1e-9) + 1e-6 * std::abs(ref[i].m))
          << "t=" << t << " i=" << i;
      ASSERT_NEAR(v[i], ref[i].v, (published ? 1e-10 : 1e-12) + 1e-6 * std::abs(ref[i].v))
          << "t=" << t << " i=" << i;
    }
  }
  std::printf("  %s lr=%g wd=%g decay=%d: max relative difference of p %.3g\n",
              published ? "published" : "note-form", c.lr, c.wd, c.with_decay, max_rel);
}

TEST(AdamW, MatchesHandComputationInDouble) {
  run_case({1e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, true}, false);
  run_case({3e-4f, 0.01f, 0.9f, 0.999f, 1e-8f, true}, false);
  run_case({1e-2f, 0.1f, 0.8f, 0.99f, 1e-6f, false}, false);
}

TEST(AdamW, MatchesPyTorchPublishedAlgorithm) {
  run_case({1e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, true}, true);
  run_case({1e-3f, 0.01f, 0.9f, 0.999f, 1e-8f, true}, true);
  run_case({5e-3f, 0.0f, 0.9f, 0.999f, 1e-8f, true}, true);
}

TEST(AdamW, StepScalarsAndBiasCorrection) {
  AdamWConfig cfg;  // 0.9, 0.95, 1e-8, 0.1
  const AdamWStep s1 = make_adamw_step(cfg, 1e-3f, 1, 0.5f, true);
  EXPECT_FLOAT_EQ(s1.step_size, 1e-3f / 0.1f);       // lr / (1 - 0.9)
  EXPECT_FLOAT_EQ(s1.bias2_sqrt, std::sqrt(0.05f));  // sqrt(1 - 0.95)
  EXPECT_FLOAT_EQ(s1.decay, 1.0f - 1e-3f * 0.1f);
  EXPECT_FLOAT_EQ(s1.one_minus_beta1, 0.1f);
  EXPECT_FLOAT_EQ(s1.one_minus_beta2, 0.05f);
  EXPECT_EQ(s1.grad_scale, 0.5f);
  const AdamWStep s2 = make_adamw_step(cfg, 1e-3f, 2, 1.0f, true);
  EXPECT_FLOAT_EQ(s2.step_size, static_cast<float>(1e-3 / (1 - 0.9 * 0.9)));
  EXPECT_FLOAT_EQ(s2.bias2_sqrt, static_cast<float>(std::sqrt(1 - 0.95 * 0.95)));
  // Late steps: corrections go to 1.
  const AdamWStep s = make_adamw_step(cfg, 1e-3f, 100000, 1.0f, true);
  EXPECT_FLOAT_EQ(s.step_size, 1e-3f);
  EXPECT_FLOAT_EQ(s.bias2_sqrt, 1.0f);
  // First step with zero state: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps):
  // about lr * sign(g) whatever the gradient's size.
  for (float gv : {1e-4f, 3.0f, -0.2f}) {
    float p = 1.0f, m = 0.0f, v = 0.0f;
    const AdamWStep st = make_adamw_step(cfg, 1e-3f, 1, 1.0f, false);
    adamw_reference(&p, &gv, DType::kF32, &m, &v, 1, st, nullptr, DType::kF32);
    EXPECT_NEAR(p, 1.0f - 1e-3f * (gv > 0 ? 1.0f : -1.0f), 1e-6f) << gv;
  }
}

TEST(AdamW, WeightDecayOnOff) {
  AdamWConfig cfg;
  cfg.weight_decay = 0.5f;
  // Zero gradient: only the decay acts (m = v = 0, update 0).
  for (bool with_decay : {true, false}) {
    float p = 2.0f, m = 0.0f, v = 0.0f, g = 0.0f;
    const AdamWStep s = make_adamw_step(cfg, 0.1f, 1, 1.0f, with_decay);
    adamw_reference(&p, &g, DType::kF32, &m, &v, 1, s, nullptr, DType::kF32);
    EXPECT_FLOAT_EQ(p, with_decay ? 2.0f * (1.0f - 0.1f * 0.5f) : 2.0f);
    EXPECT_EQ(s.decay, with_decay ? 1.0f - 0.1f * 0.5f : 1.0f);
  }
}

TEST(AdamW, GradScaleDtypesAndOut) {
  AdamWConfig cfg;
  const int64_t n = 8;
  std::vector<float> g32(n);
  std::vector<uint16_t> gbf(n), gh(n);
  for (int64_t i = 0; i < n; ++i) {
    g32[i] = 0.25f * static_cast<float>(i - 3);  // exact in bf16 and fp16
    gbf[i] = fp32_to_bf16_bits(g32[i]);
    gh[i] = fp32_to_fp16_bits(g32[i]);
  }
  // grad_scale 1/4 on 4x the gradient equals grad_scale 1 on the gradient.
  std::vector<float> g4(n);
  for (int64_t i = 0; i < n; ++i) g4[i] = 4.0f * g32[i];
  auto run = [&](const void* g, DType gd, float scale, std::vector<uint16_t>* out) {
    std::vector<float> p(n, 0.5f), m(n, 0.01f), v(n, 1e-4f);
    const AdamWStep s = make_adamw_step(cfg, 1e-3f, 3, scale, true);
    adamw_reference(p.data(), g, gd, m.data(), v.data(), n, s, out ? out->data() : nullptr,
                    DType::kBF16);
    return p;
  };
  const auto a = run(g32.data(), DType::kF32, 1.0f, nullptr);
  EXPECT_EQ(a, run(gbf.data(), DType::kBF16, 1.0f, nullptr));
  EXPECT_EQ(a, run(gh.data(), DType::kF16, 1.0f, nullptr));
  EXPECT_EQ(a, run(g4.data(), DType::kF32, 0.25f, nullptr));
  std::vector<uint16_t> out(n);
  run(g32.data(), DType::kF32, 1.0f, &out);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], fp32_to_bf16_bits(a[i]));
}

}  // namespace
}  // namespace zs::optim
