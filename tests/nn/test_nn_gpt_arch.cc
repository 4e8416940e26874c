// GptModel on the Llama-form architectures (gpt_arch_cases.h: RMSNorm, rotary positions, SwiGLU,
// grouped-query attention, biases per projection, an ffn not a multiple of the width): the checks
// the shared model suite (gpt_model_typed_test.h) makes of GPT-2, which the CUDA model shares and
// so cannot take these components. Checkpointing is bitwise, the same micro-batch twice is
// bitwise, bf16 and fp16 stay within their tolerances of fp32 (loss and every gradient), every
// gradient is finite and non-zero, SGD lowers the loss, and the row kernels the Llama family adds
// give the same bits at any thread count. Finite differences: test_nn_gpt_grad.cc; the
// independent reference forward: test_nn_llama_reference.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "nn/kernels.h"
#include "nn/threads.h"
#include "tests/nn/gpt_arch_cases.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

using testing::ArchCase;

GptConfig arch_config(const GptArchitecture& arch, DType dt) {
  GptConfig c;
  c.arch = arch;
  c.arch.layers = 2;
  c.arch.heads = 4;
  c.arch.width = 64;
  c.arch.context = 32;
  c.arch.vocab = 256;
  c.run.batch = 3;
  c.run.threads = 1;  // 2 threads crawl on a loaded machine (ctest -j with other jobs)
  c.run.compute_dtype = dt;
  return c;
}

std::vector<ArchCase> cases() {
  GptArchitecture base;
  base.width = 64;
  return testing::llama_form_cases(base);
}

std::vector<int32_t> tokens_for(const GptConfig& c, int micro_batches, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// One model and its host parameters; weights moved away from init by N(0, std) so every path
// carries signal (norm weights included).
struct ArchRun {
  ArchRun(const GptConfig& c, float std, MemoryTracker* t = nullptr)
      : model(c, t), h(model, c.run.compute_dtype, 17) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, std);
    for (size_t u = 0; u < h.num_units(); ++u)
      for (size_t p = 0; p < h.num_params(u); ++p)
        for (float& x : h.master(u, p)) x += nd(rng);
    h.refresh();
  }
  double forward_backward(const std::vector<int32_t>& tokens, int mb = 0) {
    model.set_tokens(tokens);
    model.load_micro_batch(mb);
    h.forward();
    const double loss = model.loss();
    h.backward(1.0f);
    return loss;
  }
  GptModel model;
  UnitHarness h;
};

class NnGptArch : public ::testing::TestWithParam<ArchCase> {};

std::string arch_name(const ::testing::TestParamInfo<ArchCase>& i) { return i.param.name; }

// [Note: block activations] on every architecture: recomputing a block gives the same bits.
TEST_P(NnGptArch, CheckpointedGradientsAreBitwiseEqual) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    GptConfig c = arch_config(GetParam().arch, dt);
    MemoryTracker t_plain, t_ckpt;
    ArchRun plain(c, 0.05f, &t_plain);
    c.run.checkpoint_activations = true;
    ArchRun ckpt(c, 0.05f, &t_ckpt);
    const auto tokens = tokens_for(c, 2, 3);
    for (int mb = 0; mb < 2; ++mb) {
      EXPECT_EQ(plain.forward_backward(tokens, mb), ckpt.forward_backward(tokens, mb));
      size_t compared = 0;
      for (size_t u = 0; u < plain.h.num_units(); ++u)
        for (size_t p = 0; p < plain.h.num_params(u); ++p) {
          if (plain.h.spec(u, p).tied()) continue;  // its owner's, compared there
          const auto& a = plain.h.grad(u, p);
          const auto& b = ckpt.h.grad(u, p);
          ASSERT_EQ(a.size(), b.size());
          EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << dtype_name(dt) << " unit " << u << " " << plain.h.spec(u, p).name;
          compared += a.size();
        }
      EXPECT_EQ(compared, static_cast<size_t>(c.num_params()));
    }
    EXPECT_LT(t_ckpt.peak(MemCategory::kActivations), t_plain.peak(MemCategory::kActivations));
  }
}

// The same micro-batch twice: the same loss and gradients, bit for bit.
TEST_P(NnGptArch, TwoRunsGiveTheSameBits) {
  const GptConfig c = arch_config(GetParam().arch, DType::kBF16);
  ArchRun r(c, 0.05f);
  const auto tokens = tokens_for(c, 1, 4);
  const double l0 = r.forward_backward(tokens);
  std::vector<std::vector<float>> first;
  for (size_t u = 0; u < r.h.num_units(); ++u)
    for (size_t p = 0; p < r.h.num_params(u); ++p) first.push_back(r.h.grad(u, p));
  EXPECT_EQ(r.forward_backward(tokens), l0);
  size_t k = 0;
  for (size_t u = 0; u < r.h.num_units(); ++u)
    for (size_t p = 0; p < r.h.num_params(u); ++p, ++k)
      EXPECT_EQ(r.h.grad(u, p), first[k]) << "unit " << u << " " << r.h.spec(u, p).name;
}

// Relative L2 distance of b from a.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0, n = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(d / n);
}

// bf16 and fp16 against fp32 on the same parameters: the loss within the shared suite's
// tolerances (CpuGptRunner: 2e-2 and 2e-3 relative) and every gradient within 5e-2 (bf16: 8
// significant bits through two blocks) and 1e-2 (fp16 weights, fp32 products) relative L2.
TEST_P(NnGptArch, LowPrecisionCloseToFp32) {
  const GptConfig c32 = arch_config(GetParam().arch, DType::kF32);
  const auto tokens = tokens_for(c32, 1, 9);
  ArchRun ref(c32, 0.1f);
  const double loss32 = ref.forward_backward(tokens);
  struct Tol {
    DType dt;
    double loss, grad;
  };
  for (const Tol& tol : {Tol{DType::kBF16, 2e-2, 5e-2}, Tol{DType::kF16, 2e-3, 1e-2}}) {
    ArchRun r(arch_config(GetParam().arch, tol.dt), 0.1f);
    const float scale = tol.dt == DType::kF16 ? 1024.0f : 1.0f;
    r.model.set_tokens(tokens);
    r.model.load_micro_batch(0);
    r.h.forward();
    const double loss = r.model.loss();
    r.h.backward(scale);
    EXPECT_NEAR(loss, loss32, tol.loss * loss32) << dtype_name(tol.dt);
    double worst = 0.0;
    for (size_t u = 0; u < r.h.num_units(); ++u)
      for (size_t p = 0; p < r.h.num_params(u); ++p) {
        std::vector<float> g = r.h.grad(u, p);
        for (float& x : g) x /= scale;
        const double e = rel_l2(ref.h.grad(u, p), g);
        worst = std::max(worst, e);
        EXPECT_LT(e, tol.grad) << dtype_name(tol.dt) << " unit " << u << " " << r.h.spec(u, p).name;
      }
    std::printf("%s %s: loss %.6f (fp32 %.6f), worst gradient relative L2 %.3g\n",
                GetParam().name.c_str(), std::string(dtype_name(tol.dt)).c_str(), loss, loss32,
                worst);
  }
}

// Every gradient finite and non-zero (every parameter kind reached), and eight SGD steps (lr 0.2)
// on one batch lower the loss by more than 0.3 in each compute dtype.
TEST_P(NnGptArch, GradientsReachEveryParameterAndSgdLearns) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const GptConfig c = arch_config(GetParam().arch, dt);
    ArchRun r(c, 0.02f);
    const auto tokens = tokens_for(c, 1, 2);
    const float scale = dt == DType::kF16 ? 1024.0f : 1.0f;
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 8; ++step) {
      r.model.set_tokens(tokens);
      r.model.load_micro_batch(0);
      r.h.forward();
      (step == 0 ? first : last) = r.model.loss();
      r.h.backward(scale);
      EXPECT_TRUE(r.h.produced_all());
      if (step == 0) {
        for (size_t u = 0; u < r.h.num_units(); ++u)
          for (size_t p = 0; p < r.h.num_params(u); ++p) {
            double n = 0.0;
            bool finite = true;
            for (float x : r.h.grad(u, p)) {
              finite &= std::isfinite(x);
              n += static_cast<double>(x) * x;
            }
            EXPECT_TRUE(finite && n > 0.0)
                << dtype_name(dt) << " unit " << u << " " << r.h.spec(u, p).name;
          }
      }
      r.h.sgd(0.2f, scale);  // 0.5 oscillates on the RMSNorm models
    }
    std::printf("%s %s: loss %.4f -> %.4f after 8 SGD steps\n", GetParam().name.c_str(),
                std::string(dtype_name(dt)).c_str(), first, last);
    EXPECT_LT(last, first - 0.3);  // llama_kv1, the fewest parameters: -0.44
  }
}

// The activation plan is what the model registers, and after the constructor neither training
// steps nor inference allocate (checkpointing on and off).
TEST_P(NnGptArch, StepsAndInferenceAllocateNothing) {
  for (bool ckpt : {false, true}) {
    GptConfig c = arch_config(GetParam().arch, DType::kBF16);
    c.run.checkpoint_activations = ckpt;
    MemoryTracker t;
    ArchRun r(c, 0.02f, &t);
    EXPECT_EQ(r.model.activation_plan().total(), r.model.activation_bytes());
    const auto tokens = tokens_for(c, 2, 6);
    r.model.set_tokens(tokens);
    const int64_t acts = t.current(MemCategory::kActivations), total = t.current_total();
    EXPECT_GE(acts, r.model.activation_bytes());
    t.reset_peaks();
    for (int mb = 0; mb < 2; ++mb) EXPECT_TRUE(std::isfinite(r.forward_backward(tokens, mb)));
    r.model.set_inference_input(tokens.data(), 5);
    r.h.forward(false);
    EXPECT_EQ(r.model.last_logits().size(), static_cast<size_t>(c.arch.vocab));
    EXPECT_EQ(t.peak(MemCategory::kActivations), acts) << "ckpt " << ckpt;
    EXPECT_EQ(t.peak_total(), total) << "ckpt " << ckpt;
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaForm, NnGptArch, ::testing::ValuesIn(cases()), arch_name);

// Runs f under 1, 2 and 3 threads and expects the three outputs bitwise equal.
template <typename F>
void expect_thread_independent(const char* what, F&& f) {
  std::vector<float> one;
  for (int threads : {1, 2, 3}) {
    ThreadScope scope(threads);
    const std::vector<float> got = f();
    if (threads == 1)
      one = got;
    else
      EXPECT_EQ(got, one) << what << " at " << threads << " threads";
  }
}

// The row kernels the Llama family adds (nn/kernels.h: "results do not depend on the thread
// count"), at the model's layouts: RMSNorm forward and backward, SwiGLU on fused [gate | up] rows,
// RoPE on the q and k heads of a GQA qkv row.
TEST(NnGptArchKernels, LlamaRowKernelsIndependentOfThreadCount) {
  const int M = 70, C = 96, F = 136, T = 35, H = 6, KV = 2, hd = C / H;
  const int64_t Q = C + 2 * KV * hd;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto rnd = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = nd(rng);
    return v;
  };
  const auto x = rnd(M * C), w = rnd(C), dy = rnd(M * C), gu = rnd(M * 2 * F), dg = rnd(M * F);
  const auto qkv = rnd(M * Q);
  expect_thread_independent("rmsnorm", [&] {
    std::vector<float> out(M * C), rstd(M), dx(M * C, 0.0f), dw(C, 0.0f);
    rmsnorm_forward(x.data(), w.data(), M, C, 1e-6f, out.data(), DType::kF32, rstd.data());
    rmsnorm_backward(x.data(), w.data(), rstd.data(), dy.data(), M, C, dx.data(), dw.data());
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
    return out;
  });
  expect_thread_independent("swiglu rows", [&] {
    std::vector<float> out(M * F), d(M * 2 * F);
    swiglu_forward_rows(gu.data(), M, F, out.data(), DType::kF32);
    swiglu_backward_rows(gu.data(), dg.data(), M, F, d.data());
    out.insert(out.end(), d.begin(), d.end());
    return out;
  });
  expect_thread_independent("rope", [&] {
    std::vector<float> v = qkv;
    rope_forward(v.data(), M, T, H, hd, Q, 10000.0f);
    rope_forward(v.data() + C, M, T, KV, hd, Q, 10000.0f);
    rope_backward(v.data(), M, T, H, hd, Q, 500000.0f);
    return v;
  });
}

}  // namespace
}  // namespace zs::nn
