// The behaviour every GPT model (models/gpt/gpt_model_base.h) shares, as one type-parameterized
// GoogleTest suite, GptModelTest, run against each device through a Runner: test_nn_gpt.cc
// instantiates it for the CPU model (CpuGptRunner), cuda_gpt_test.cc for the CUDA model
// (CudaGptRunner, skipped with "no CUDA device" without one). Include in one translation unit per
// test binary, after the runner is defined, and instantiate with
//   INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, GptModelTest, CpuGptRunner);
//
// A Runner owns one model and the parameters and gradients of its units, and drives the units by
// hand as the engine would for one rank without sharding:
//   static const char* unavailable();       // why the model cannot run here; nullptr when it can
//   static constexpr double kBf16LossRel;   // |loss(bf16) - loss(fp32)| / loss(fp32) allowed
//   static constexpr double kFp16LossRel;   // the same for fp16
//   Runner(const GptConfig& c, uint64_t seed, MemoryTracker* tracker = nullptr);
//   Model& model();                          // the GptModelBase under test
//   std::vector<float>& master(u, i);        // fp32 master values drawn from the specs (seed)
//   void refresh();                          // hands edited master values to the model
//   void forward(bool training = true);      // every unit in order
//   void backward(float loss_scale = 1.0f);  // gradients zeroed, units in reverse
//   std::vector<float> grad(u, i);           // fp32 gradient of the last backward
//   bool produced_all() const;               // every backward produced every gradient
//   void sgd(float lr, float loss_scale = 1.0f);  // master -= lr * grad / loss_scale; refresh()
//   size_t num_units() const; size_t num_params(u) const; const ParamSpec& spec(u, i) const;
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_model_base.h"
#include "models/gpt/gpt_specs.h"
#include "nn/kernels.h"

namespace zs::nn::testing {

// The block layout of the default (GPT-2) architecture.
inline const GptBlockLayout kGpt2Block = GptBlockLayout::of(GptArchitecture{});

inline GptConfig gpt_test_config(DType dt = DType::kF32) {
  GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 2;
  c.arch.width = 64;
  c.arch.context = 32;
  c.arch.vocab = 256;
  c.run.batch = 4;
  c.run.threads = 2;
  c.run.compute_dtype = dt;
  return c;
}

inline std::vector<int32_t> gpt_test_tokens(const GptConfig& c, int micro_batches, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// Moves every parameter away from GPT-2's init (biases and LN parameters included), so every path
// of the forward and backward carries signal.
template <typename Runner>
void perturb_params(Runner& r, uint32_t seed, float std) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, std);
  for (size_t u = 0; u < r.num_units(); ++u)
    for (size_t i = 0; i < r.num_params(u); ++i)
      for (float& x : r.master(u, i)) x += nd(rng);
  r.refresh();
}

// Runs f, which must throw zs::Error whose message contains `want`.
template <typename F>
void expect_error(F&& f, const std::string& want) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << want;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << want;
  }
}

template <typename Runner>
class GptModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = Runner::unavailable()) GTEST_SKIP() << why;
  }
};

TYPED_TEST_SUITE_P(GptModelTest);

// Names, order and parameters of the units are models/gpt/gpt_specs.h's, with and without
// checkpointing.
TYPED_TEST_P(GptModelTest, UnitsAndSpecsFollowGptSpecs) {
  for (bool ckpt : {false, true}) {
    GptConfig c = gpt_test_config(DType::kBF16);
    c.arch.layers = 3;
    c.run.checkpoint_activations = ckpt;
    TypeParam r(c, 1);
    GptModelBase& m = r.model();
    ASSERT_EQ(m.num_units(), 5u);
    EXPECT_EQ(m.unit(0).name(), "embed");
    EXPECT_EQ(m.unit(1).name(), "block.0");
    EXPECT_EQ(m.unit(3).name(), "block.2");
    EXPECT_EQ(m.unit(4).name(), "head");
    int64_t n = 0;
    for (size_t u = 0; u < m.num_units(); ++u) {
      EXPECT_EQ(m.unit(u).name(), gpt_unit_name(c, u));
      const auto got = m.unit(u).param_specs(), want = gpt_unit_specs(c, u);
      ASSERT_EQ(got.size(), want.size()) << "unit " << u;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].name, want[i].name);
        EXPECT_EQ(got[i].shape, want[i].shape);
        EXPECT_EQ(got[i].init.kind, want[i].init.kind);
        EXPECT_EQ(got[i].init.a, want[i].init.a);
        EXPECT_EQ(got[i].init.b, want[i].init.b);
        EXPECT_EQ(got[i].weight_decay, want[i].weight_decay);
        n += got[i].numel();
      }
    }
    EXPECT_EQ(gpt_unit_specs(c, 1).size(), static_cast<size_t>(kGpt2Block.count));
    EXPECT_EQ(n, m.num_params());
    EXPECT_EQ(m.config().arch.layers, 3);
    expect_error([&] { m.unit(5); }, "gpt: unit 5 of 5");
  }
}

TYPED_TEST_P(GptModelTest, DefaultShapeNumParams) {
  GptConfig c;  // the default shape: 4 layers, width 256, vocab 256
  TypeParam r(c, 7);
  GptModelBase& m = r.model();
  int64_t n = 0;
  for (size_t u = 0; u < m.num_units(); ++u)
    for (const ParamSpec& s : m.unit(u).param_specs()) n += s.numel();
  EXPECT_EQ(n, m.num_params());
  EXPECT_EQ(m.num_units(), 6u);
  std::printf("default config: %lld params, %.2f MiB activations\n", static_cast<long long>(n),
              m.activation_bytes() / 1048576.0);
}

TYPED_TEST_P(GptModelTest, LossAtInitIsLogVocab) {
  GptConfig c;  // default shape
  TypeParam r(c, 7);
  auto tokens = gpt_test_tokens(c, 1, 1);
  r.model().set_tokens(tokens);
  r.model().load_micro_batch(0);
  r.forward();
  std::printf("loss at init %.5f, ln(256) = %.5f\n", r.model().loss(), std::log(256.0));
  EXPECT_NEAR(r.model().loss(), std::log(256.0), 0.05);
}

// GPT-2's vocabulary, past the layer norm's row limit (which bounds the width only).
TYPED_TEST_P(GptModelTest, LargeVocabulary) {
  GptConfig c = gpt_test_config();
  c.arch.layers = 1;
  c.arch.vocab = 50257;
  c.run.batch = 2;
  c.arch.context = 8;
  TypeParam r(c, 7);
  auto tokens = gpt_test_tokens(c, 1, 3);
  r.model().set_tokens(tokens);
  r.model().load_micro_batch(0);
  r.forward();
  const double loss = r.model().loss();
  std::printf("vocab 50257: loss at init %.5f, ln(50257) = %.5f\n", loss, std::log(50257.0));
  EXPECT_NEAR(loss, std::log(50257.0), 0.15);  // 16 tokens: the logits spread adds ~0.07
  r.backward(1.0f);
  EXPECT_TRUE(r.produced_all());
}

TYPED_TEST_P(GptModelTest, RejectsBadConfig) {
  GptConfig wide = gpt_test_config();
  wide.arch.width = kMaxRow + 64;
  wide.arch.heads = 1;
  expect_error([&] { wide.validate(); }, "gpt config: width 16448 must be at most 16384");
  expect_error([&] { TypeParam r(wide, 1); }, "gpt config: width 16448 must be at most 16384");
  GptConfig heads = gpt_test_config();
  heads.arch.heads = 3;
  expect_error([&] { TypeParam r(heads, 1); }, "gpt config: width 64 must divide by heads 3");
  GptConfig dt = gpt_test_config(DType::kF64);
  expect_error([&] { TypeParam r(dt, 1); }, "gpt config: compute dtype must be fp32, bf16 or fp16");
}

// Every bad input is refused before the device sees it, with the same message on every device.
TYPED_TEST_P(GptModelTest, RejectsBadTokens) {
  const GptConfig c = gpt_test_config();  // batch 4, context 32, vocab 256
  TypeParam r(c, 1);
  GptModelBase& m = r.model();
  EXPECT_TRUE(std::isnan(m.loss()));
  EXPECT_EQ(m.num_token_micro_batches(), 0);
  std::vector<int32_t> t(c.run.batch * (c.arch.context + 1), 0);
  t[5] = c.arch.vocab;
  expect_error([&] { m.set_tokens(t); }, "gpt: token 256 at index 5 outside [0, 256)");
  t[5] = -1;
  expect_error([&] { m.set_tokens(t); }, "gpt: token -1 at index 5 outside [0, 256)");
  std::vector<int32_t> short_t(7, 0);
  expect_error([&] { m.set_tokens(short_t); },
               "gpt: 7 tokens is not a whole number of micro-batches of 4 x 33");
  expect_error([&] { m.set_tokens({}); },
               "gpt: 0 tokens is not a whole number of micro-batches of 4 x 33");
  expect_error([&] { m.load_micro_batch(0); },
               "gpt: micro-batch 0 requested, 0 set by set_tokens()");

  // A refused set_tokens() leaves the previous tokens in place.
  const auto good = gpt_test_tokens(c, 2, 4);
  m.set_tokens(good);
  EXPECT_EQ(m.num_token_micro_batches(), 2);
  expect_error([&] { m.set_tokens(t); }, "outside [0, 256)");
  EXPECT_EQ(m.num_token_micro_batches(), 2);
  expect_error([&] { m.load_micro_batch(2); },
               "gpt: micro-batch 2 requested, 2 set by set_tokens()");
  expect_error([&] { m.load_micro_batch(-1); },
               "gpt: micro-batch -1 requested, 2 set by set_tokens()");

  // Inference prompts.
  std::vector<int32_t> prompt(c.arch.context + 1, 1);
  expect_error([&] { m.set_inference_input(prompt.data(), 0); },
               "gpt: inference length 0 outside [1, 32]");
  expect_error([&] { m.set_inference_input(prompt.data(), c.arch.context + 1); },
               "gpt: inference length 33 outside [1, 32]");
  prompt[3] = -1;
  expect_error([&] { m.set_inference_input(prompt.data(), 10); },
               "gpt: token -1 at index 3 outside [0, 256)");
  prompt[3] = c.arch.vocab;
  expect_error([&] { m.set_inference_input(prompt.data(), 10); },
               "gpt: token 256 at index 3 outside [0, 256)");
  m.set_inference_input(prompt.data(), 3);  // the bad id lies past the prompt

  // Parameter lists of the wrong length.
  std::vector<ParamView> none;
  StepInfo info;
  expect_error([&] { m.unit(1).forward(none, info); }, "block.0: 0 parameters given, 12 expected");
}

TYPED_TEST_P(GptModelTest, SgdOnRepeatedBatchReducesLoss) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const GptConfig c = gpt_test_config(dt);
    TypeParam r(c, 3);
    auto tokens = gpt_test_tokens(c, 1, 2);
    r.model().set_tokens(tokens);
    const float scale = dt == DType::kF16 ? 1024.0f : 1.0f;
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 8; ++step) {
      r.model().load_micro_batch(0);
      r.forward();
      if (step == 0) first = r.model().loss();
      last = r.model().loss();
      r.backward(scale);
      r.sgd(0.5f, scale);
    }
    EXPECT_TRUE(r.produced_all());
    std::printf("%s: loss %.4f -> %.4f after 8 SGD steps\n", std::string(dtype_name(dt)).c_str(),
                first, last);
    EXPECT_NEAR(first, std::log(256.0), 0.1);
    EXPECT_LT(last, first - 0.5);
  }
}

// [Note: block activations]: recomputing a block in backward gives the gradients bitwise.
TYPED_TEST_P(GptModelTest, CheckpointedGradientsAreBitwiseEqual) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    GptConfig c = gpt_test_config(dt);
    c.arch.layers = 3;
    MemoryTracker t_plain, t_ckpt;
    TypeParam plain(c, 11, &t_plain);
    c.run.checkpoint_activations = true;
    TypeParam ckpt(c, 11, &t_ckpt);
    perturb_params(plain, 5, 0.05f);
    perturb_params(ckpt, 5, 0.05f);
    auto tokens = gpt_test_tokens(c, 2, 5);
    plain.model().set_tokens(tokens);
    ckpt.model().set_tokens(tokens);
    for (int mb = 0; mb < 2; ++mb) {
      plain.model().load_micro_batch(mb);
      ckpt.model().load_micro_batch(mb);
      plain.forward();
      ckpt.forward();
      EXPECT_EQ(plain.model().loss(), ckpt.model().loss());
      plain.backward();
      ckpt.backward();
      size_t compared = 0;
      for (size_t u = 0; u < plain.num_units(); ++u)
        for (size_t i = 0; i < plain.num_params(u); ++i) {
          const auto a = plain.grad(u, i), b = ckpt.grad(u, i);
          ASSERT_EQ(a.size(), b.size());
          EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << dtype_name(dt) << " unit " << u << " param " << plain.spec(u, i).name;
          compared += a.size();
        }
      EXPECT_GT(compared, 0u);
    }
    const int64_t a_plain = t_plain.peak(MemCategory::kActivations);
    const int64_t a_ckpt = t_ckpt.peak(MemCategory::kActivations);
    std::printf("%s activations peak: %.2f MiB plain, %.2f MiB checkpointed\n",
                std::string(dtype_name(dt)).c_str(), a_plain / 1048576.0, a_ckpt / 1048576.0);
    EXPECT_LT(a_ckpt, a_plain);
    EXPECT_LT(ckpt.model().activation_bytes(), plain.model().activation_bytes());
    // The tracker holds at least what the model reports (the CPU's GEMM primitives register more).
    EXPECT_GE(t_plain.current(MemCategory::kActivations), plain.model().activation_bytes());
    EXPECT_GE(t_ckpt.current(MemCategory::kActivations), ckpt.model().activation_bytes());
  }
}

// The same micro-batch twice gives the same loss and gradients, bit for bit.
TYPED_TEST_P(GptModelTest, TwoRunsGiveTheSameBits) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const GptConfig c = gpt_test_config(dt);
    TypeParam r(c, 31);
    perturb_params(r, 7, 0.05f);
    const auto tokens = gpt_test_tokens(c, 1, 8);
    r.model().set_tokens(tokens);
    std::vector<std::vector<float>> first;
    double loss0 = 0.0;
    for (int run = 0; run < 2; ++run) {
      r.model().load_micro_batch(0);
      r.forward();
      if (run == 0) loss0 = r.model().loss();
      EXPECT_EQ(r.model().loss(), loss0);
      r.backward();
      size_t k = 0;
      for (size_t u = 0; u < r.num_units(); ++u)
        for (size_t i = 0; i < r.num_params(u); ++i, ++k) {
          auto g = r.grad(u, i);
          if (run == 0) {
            first.push_back(std::move(g));
          } else {
            EXPECT_EQ(0, std::memcmp(g.data(), first[k].data(), g.size() * sizeof(float)))
                << dtype_name(dt) << " unit " << u << " param " << r.spec(u, i).name;
          }
        }
    }
  }
}

// Micro-batches are selected by index, in any order, and each gives its own loss and gradients.
TYPED_TEST_P(GptModelTest, MicroBatchesLoadByIndex) {
  const GptConfig c = gpt_test_config();
  TypeParam r(c, 13);
  perturb_params(r, 2, 0.05f);
  const auto tokens = gpt_test_tokens(c, 3, 6);
  r.model().set_tokens(tokens);
  EXPECT_EQ(r.model().num_token_micro_batches(), 3);
  std::vector<double> loss(3);
  std::vector<float> grad_wte_1;
  for (int mb = 0; mb < 3; ++mb) {
    r.model().load_micro_batch(mb);
    r.forward();
    loss[mb] = r.model().loss();
    r.backward();
    if (mb == 1) grad_wte_1 = r.grad(0, 0);
  }
  EXPECT_NE(loss[0], loss[1]);
  EXPECT_NE(loss[1], loss[2]);
  for (int mb : {2, 0, 1}) {
    r.model().load_micro_batch(mb);
    r.forward();
    EXPECT_EQ(r.model().loss(), loss[mb]) << "micro-batch " << mb;
    r.backward();
  }
  const auto g = r.grad(0, 0);
  EXPECT_EQ(0, std::memcmp(g.data(), grad_wte_1.data(), g.size() * sizeof(float)));
  // A single micro-batch given alone is the same data: the same loss.
  std::vector<int32_t> one(
      tokens.begin() + static_cast<int64_t>(c.run.batch) * (c.arch.context + 1),
      tokens.begin() + 2 * static_cast<int64_t>(c.run.batch) * (c.arch.context + 1));
  r.model().set_tokens(one);
  EXPECT_EQ(r.model().num_token_micro_batches(), 1);
  r.model().load_micro_batch(0);
  r.forward();
  EXPECT_EQ(r.model().loss(), loss[1]);
}

// Every gradient is finite and non-zero; the embedding gradients are the scatter and the position
// sum of the same residual gradient (their column sums agree); rows of ids absent from the batch
// get no gradient; and in fp32 the LM head's gradient sums to zero over the vocabulary (softmax
// minus one-hot sums to zero in every row).
TYPED_TEST_P(GptModelTest, GradientSumsAndFiniteness) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const GptConfig c = gpt_test_config(dt);
    TypeParam r(c, 19);
    perturb_params(r, 4, 0.05f);
    const auto tokens = gpt_test_tokens(c, 1, 12);
    r.model().set_tokens(tokens);
    r.model().load_micro_batch(0);
    r.forward();
    r.backward(2.0f);
    EXPECT_TRUE(r.produced_all());
    const std::string tag(dtype_name(dt));
    for (size_t u = 0; u < r.num_units(); ++u)
      for (size_t i = 0; i < r.num_params(u); ++i) {
        const auto g = r.grad(u, i);
        double norm = 0.0;
        bool finite = true;
        for (float x : g) {
          finite &= std::isfinite(x);
          norm += static_cast<double>(x) * x;
        }
        EXPECT_TRUE(finite) << tag << " unit " << u << " param " << r.spec(u, i).name;
        EXPECT_GT(norm, 0.0) << tag << " unit " << u << " param " << r.spec(u, i).name;
      }
    const int C = c.arch.width, T = c.arch.context, V = c.arch.vocab;
    const auto dwte = r.grad(0, 0), dwpe = r.grad(0, 1);
    std::set<int32_t> used;
    for (int b = 0; b < c.run.batch; ++b)
      for (int t = 0; t < T; ++t) used.insert(tokens[static_cast<size_t>(b) * (T + 1) + t]);
    double worst = 0.0;
    for (int col = 0; col < C; ++col) {
      double s_te = 0.0, s_pe = 0.0, abs_sum = 0.0;
      for (int v = 0; v < V; ++v) {
        s_te += dwte[static_cast<size_t>(v) * C + col];
        abs_sum += std::fabs(dwte[static_cast<size_t>(v) * C + col]);
      }
      for (int t = 0; t < T; ++t) s_pe += dwpe[static_cast<size_t>(t) * C + col];
      worst = std::max(worst, std::fabs(s_te - s_pe) / abs_sum);
      EXPECT_NEAR(s_te, s_pe, 1e-5 * abs_sum) << tag << " column " << col;
    }
    std::printf("%s: sum(dwte) vs sum(dwpe): worst relative difference %.2e\n", tag.c_str(), worst);
    for (int v = 0; v < V; ++v) {
      if (used.count(v)) continue;
      for (int col = 0; col < C; ++col)
        ASSERT_EQ(dwte[static_cast<size_t>(v) * C + col], 0.0f) << tag << " unused id " << v;
    }
    if (dt != DType::kF32) continue;  // a 16-bit dlogits no longer sums to zero exactly
    const size_t head = r.num_units() - 1;
    const auto dlm = r.grad(head, 2);
    worst = 0.0;
    for (int col = 0; col < C; ++col) {
      double s = 0.0, abs_sum = 0.0;
      for (int v = 0; v < V; ++v) {
        s += dlm[static_cast<size_t>(v) * C + col];
        abs_sum += std::fabs(dlm[static_cast<size_t>(v) * C + col]);
      }
      worst = std::max(worst, std::fabs(s) / abs_sum);
      EXPECT_LE(std::fabs(s), 1e-4 * abs_sum) << "lm_head column " << col;
    }
    std::printf("fp32: |sum over vocab of dlm_head| / sum |.|: worst %.2e\n", worst);
  }
}

TYPED_TEST_P(GptModelTest, LowPrecisionLossCloseToFp32) {
  GptConfig c = gpt_test_config();
  auto tokens = gpt_test_tokens(c, 1, 9);
  double loss[3];
  int k = 0;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    c.run.compute_dtype = dt;
    TypeParam r(c, 21);
    // Larger weights than at init so the logits are not all near zero.
    for (size_t u = 0; u < r.num_units(); ++u)
      for (size_t i = 0; i < r.num_params(u); ++i)
        if (r.spec(u, i).shape.size() == 2)
          for (float& x : r.master(u, i)) x *= 5.0f;
    r.refresh();
    r.model().set_tokens(tokens);
    r.model().load_micro_batch(0);
    r.forward();
    loss[k++] = r.model().loss();
  }
  std::printf("loss fp32 %.6f bf16 %.6f fp16 %.6f\n", loss[0], loss[1], loss[2]);
  EXPECT_NEAR(loss[1], loss[0], TypeParam::kBf16LossRel * loss[0]);
  EXPECT_NEAR(loss[2], loss[0], TypeParam::kFp16LossRel * loss[0]);
}

TYPED_TEST_P(GptModelTest, InferenceIsCausalAndDeterministic) {
  const GptConfig c = gpt_test_config();
  TypeParam r(c, 4);
  perturb_params(r, 9, 0.05f);
  GptModelBase& m = r.model();
  auto tokens = gpt_test_tokens(c, 1, 3);
  m.set_inference_input(tokens.data(), 10);
  r.forward(false);
  std::vector<float> a(m.last_logits().begin(), m.last_logits().end());
  ASSERT_EQ(a.size(), static_cast<size_t>(c.arch.vocab));
  // Same prompt again after a longer one: the same logits.
  m.set_inference_input(tokens.data(), 20);
  r.forward(false);
  std::vector<float> b(m.last_logits().begin(), m.last_logits().end());
  ASSERT_EQ(b.size(), static_cast<size_t>(c.arch.vocab));
  m.set_inference_input(tokens.data(), 10);
  r.forward(false);
  std::vector<float> a2(m.last_logits().begin(), m.last_logits().end());
  EXPECT_EQ(0, std::memcmp(a.data(), a2.data(), a.size() * sizeof(float)));
  EXPECT_NE(a, b);
  for (float x : a) EXPECT_TRUE(std::isfinite(x));
  double mx = a[0], sum = 0.0;
  for (float x : a) mx = std::max<double>(mx, x);
  for (float x : a) sum += std::exp(x - mx);
  EXPECT_GT(sum, 1.0);
  // No backward after an inference forward; load_micro_batch() returns to training.
  expect_error([&] { r.backward(); }, "gpt head: backward after an inference forward");
  m.set_tokens(tokens);
  m.load_micro_batch(0);
  r.forward();
  EXPECT_TRUE(std::isfinite(m.loss()));
  r.backward();
  EXPECT_THROW(m.set_inference_input(tokens.data(), c.arch.context + 1), Error);
}

// As far as the tracker sees: after the constructor, steps and inference allocate nothing, and
// every activation byte the model reports is registered (exactly so on CUDA: cuda_gpt_test.cc's
// ActivationsMatchPlan).
TYPED_TEST_P(GptModelTest, StepsAllocateNothing) {
  for (bool ckpt : {false, true}) {
    GptConfig c = gpt_test_config(DType::kBF16);
    c.run.checkpoint_activations = ckpt;
    MemoryTracker tracker;
    TypeParam r(c, 2, &tracker);
    const auto tokens = gpt_test_tokens(c, 3, 4);
    r.model().set_tokens(tokens);
    const int64_t acts = tracker.current(MemCategory::kActivations);
    const int64_t total = tracker.current_total();
    EXPECT_GE(acts, r.model().activation_bytes());
    tracker.reset_peaks();
    for (int mb = 0; mb < 3; ++mb) {
      r.model().load_micro_batch(mb);
      r.forward();
      EXPECT_TRUE(std::isfinite(r.model().loss()));
      r.backward();
    }
    r.model().set_inference_input(tokens.data(), 5);
    r.forward(false);
    EXPECT_EQ(r.model().last_logits().size(), static_cast<size_t>(c.arch.vocab));
    EXPECT_EQ(tracker.peak(MemCategory::kActivations), acts);
    EXPECT_EQ(tracker.current(MemCategory::kActivations), acts);
    EXPECT_EQ(tracker.peak_total(), total);
  }
}

REGISTER_TYPED_TEST_SUITE_P(GptModelTest, UnitsAndSpecsFollowGptSpecs, DefaultShapeNumParams,
                            LossAtInitIsLogVocab, LargeVocabulary, RejectsBadConfig,
                            RejectsBadTokens, SgdOnRepeatedBatchReducesLoss,
                            CheckpointedGradientsAreBitwiseEqual, TwoRunsGiveTheSameBits,
                            MicroBatchesLoadByIndex, GradientSumsAndFiniteness,
                            LowPrecisionLossCloseToFp32, InferenceIsCausalAndDeterministic,
                            StepsAllocateNothing);

}  // namespace zs::nn::testing
