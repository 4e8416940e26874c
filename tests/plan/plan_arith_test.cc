// The planner reproduces the published memory arithmetic: 16 bytes/param of model states for
// fp32 training with Adam (and about 24 GB for a 1B model with activations and buffers), the
// ZeRO paper's 7.5B-parameter model on 64 ranks (120 / 31.4 / 16.6 / 1.9 GB for stages 0-3),
// parameter counts of GPT-2 and LLaMA-6.7B from their dimensions; and --fit's search.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/memory_plan.h"

namespace zs {
namespace {

constexpr double kGB = 1e9;

PlanConfig config(int stage, DType p, DType g, int world) {
  PlanConfig c;
  c.engine.stage = zero_stage_from_int(stage);
  c.engine.precision.param_dtype = p;
  c.engine.precision.grad_dtype = g;
  c.world = world;
  return c;
}

TEST(PlanArith, OneBillionFp32AdamIs16GB) {
  const ModelDesc d = ModelDesc::from_param_count(1'000'000'000);
  EXPECT_EQ(d.num_params(), 1'000'000'000);
  const MemoryPlan p = plan_memory(d, config(0, DType::kF32, DType::kF32, 1));
  EXPECT_EQ(p.bytes(MemCategory::kParams), 4 * p.num_padded_params);
  EXPECT_EQ(p.bytes(MemCategory::kGrads), 4 * p.num_padded_params);
  EXPECT_EQ(p.bytes(MemCategory::kMaster), 0) << "fp32 parameters are their own master";
  EXPECT_EQ(p.bytes(MemCategory::kOptimizer), 8 * p.num_padded_params);
  EXPECT_EQ(p.model_states_bytes() - p.padding_bytes(), 16 * p.num_params);
  EXPECT_NEAR(p.model_states_bytes() / kGB, 16.0, 0.001);
}

// The "usual overheads": a 1B GPT (24 layers, width 1792, GPT-2 vocabulary, context 1024) at one
// 1024-token sequence per micro-batch, fp32, no checkpointing, and a 1 GB CUDA context reserve.
TEST(PlanArith, OneBillionWithOverheadsIsAbout24GB) {
  TransformerShape s;
  s.layers = 24;
  s.width = 1792;
  s.heads = 14;
  s.vocab = 50257;
  s.context = 1024;
  const ModelDesc d = ModelDesc::from_transformer(s);
  PlanConfig c = config(0, DType::kF32, DType::kF32, 1);
  c.global_batch = 1;
  c.reserve_bytes = 1'000'000'000;
  const MemoryPlan p = plan_memory(d, c);
  std::printf(
      "1B GPT: Psi %.3g, model states %.2f GB, activations %.2f GB, comm %.2f GB, "
      "reserve %.2f GB, total %.2f GB\n",
      static_cast<double>(p.num_params), p.model_states_bytes() / kGB,
      p.bytes(MemCategory::kActivations) / kGB, p.bytes(MemCategory::kCommBuffers) / kGB,
      p.reserve_bytes / kGB, p.device_bytes() / kGB);
  EXPECT_NEAR(p.num_params / kGB, 1.0, 0.12);
  EXPECT_NEAR(p.device_bytes() / kGB, 24.0, 2.0);
}

// ZeRO (Rajbhandari et al. 2020), Figure 1: Psi = 7.5B, N = 64, K = 12, fp16 params and grads.
TEST(PlanArith, ZeroPaper7_5BOn64Ranks) {
  const ModelDesc d = ModelDesc::from_param_count(7'500'000'000);
  const double expected[] = {120.0, 31.4, 16.6, 1.9};
  const double exact[] = {120.0, 31.40625, 16.640625, 1.875};
  for (int stage = 0; stage <= 3; ++stage) {
    const MemoryPlan p = plan_memory(d, config(stage, DType::kF16, DType::kF16, 64));
    const int64_t psi = p.num_padded_params, shard = psi / 64;
    const int64_t psi_p = stage == 3 ? shard : psi, psi_g = stage >= 2 ? shard : psi,
                  psi_o = stage >= 1 ? shard : psi;
    EXPECT_EQ(p.model_states_bytes(), 2 * psi_p + 2 * psi_g + 12 * psi_o) << stage;
    const double gb = p.model_states_bytes() / kGB;
    EXPECT_NEAR(gb, exact[stage], exact[stage] * 1e-5) << stage;  // padding only
    // The paper's figures, as printed (3 significant digits; 2 for stage 3).
    EXPECT_NEAR(gb, expected[stage], stage == 3 ? 0.05 : 0.05) << stage;
    std::printf("stage %d: %.2f GB per rank (paper: %g GB)\n", stage, gb, expected[stage]);
  }
}

TEST(PlanArith, ParameterCountsFromDimensions) {
  const TransformerShape llama = *transformer_shape_by_name("llama-7b");
  EXPECT_EQ(llama.num_params(), 6'738'415'616);  // LLaMA-7B ("6.7B")
  EXPECT_NEAR(llama.num_params() / kGB, 6.74, 0.005);
  // GPT-2 small: 124,439,808 with the head tied to wte; our GPT's head is its own parameter.
  const TransformerShape gpt2 = *transformer_shape_by_name("gpt2");
  EXPECT_EQ(gpt2.num_params(), 124'439'808 + 50257 * 768);
  EXPECT_EQ(transformer_shape_by_name("gpt2-xl")->num_params(), 1'557'611'200 + 50257 * 1600);
  EXPECT_FALSE(transformer_shape_by_name("gpt5").has_value());
  for (const std::string& n : transformer_shape_names())
    EXPECT_TRUE(transformer_shape_by_name(n).has_value()) << n;
}

TEST(PlanArith, LlamaStage3On8RanksBf16) {
  const ModelDesc d = ModelDesc::from_transformer(*transformer_shape_by_name("llama-7b"));
  PlanConfig c = config(3, DType::kBF16, DType::kF32, 8);
  c.global_batch = 8;
  const MemoryPlan p = plan_memory(d, c);
  // bf16 params + fp32 grads + fp32 master + Adam: 2 + 4 + 12 = 18 bytes/param over 8 ranks.
  EXPECT_NEAR(p.model_states_bytes() / kGB, 18.0 * 6.738415616 / 8, 0.01);
  EXPECT_FALSE(p.activations.exact);
  EXPECT_GT(p.activations.total(), 0);
}

TEST(PlanArith, ParamCountSplitIsPlausible) {
  for (int64_t n : {1LL, 1000LL, 124'000'000LL, 7'500'000'000LL, 175'000'000'000LL}) {
    const auto units = units_for_param_count(n);
    int64_t sum = 0, mx = 0, mn = n;
    for (const auto& u : units) {
      sum += u[0];
      mx = std::max(mx, u[0]);
      mn = std::min(mn, u[0]);
    }
    EXPECT_EQ(sum, n);
    EXPECT_LE(mx - mn, 1);
  }
  EXPECT_EQ(units_for_param_count(7'500'000'000).size(), 34u);
  EXPECT_THROW(units_for_param_count(0), Error);
}

TEST(PlanArith, ActivationCheckpointingShrinksActivations) {
  const TransformerShape s = *transformer_shape_by_name("gpt2");
  const ActivationPlan full = plan_transformer_activations(s, 4, DType::kBF16, false);
  const ActivationPlan ck = plan_transformer_activations(s, 4, DType::kBF16, true);
  EXPECT_EQ(full.blocks, s.layers * full.per_layer);
  EXPECT_EQ(ck.blocks, s.layers * ck.per_layer_checkpointed);
  EXPECT_EQ(ck.recompute, full.per_layer - full.per_layer_checkpointed);
  EXPECT_LT(ck.blocks + ck.recompute, (full.blocks + full.recompute) / 3);
  EXPECT_EQ(full.total() - ck.total(),
            (s.layers - 1) * (full.per_layer - full.per_layer_checkpointed));
}

TEST(PlanArith, FitListsCheapestFirstAndAllFit) {
  const ModelDesc d = ModelDesc::from_transformer(*transformer_shape_by_name("gpt2-xl"));
  PlanConfig base = config(0, DType::kBF16, DType::kF32, 8);
  base.global_batch = 64;
  base.reserve_bytes = 1'000'000'000;
  const int64_t budget = 40'000'000'000;
  const auto fits = fit_configurations(d, base, budget);
  ASSERT_FALSE(fits.empty());
  for (size_t i = 0; i < fits.size(); ++i) {
    EXPECT_LE(fits[i].plan.device_bytes(), budget);
    if (i > 0) {
      EXPECT_LE(fits[i - 1].cost, fits[i].cost);
    }
  }
  EXPECT_TRUE(fit_configurations(d, base, 1'000'000).empty());
}

TEST(PlanArith, BadConfigurationsThrow) {
  const ModelDesc d = ModelDesc::from_param_count(1000);
  PlanConfig c = config(0, DType::kF32, DType::kF32, 4);
  c.ranks_per_node = 3;
  EXPECT_THROW(plan_memory(d, c), Error);
  c = config(0, DType::kF32, DType::kF32, 4);
  c.global_batch = 6;
  EXPECT_THROW(plan_memory(d, c), Error);
  c = config(0, DType::kBF16, DType::kF16, 1);
  EXPECT_THROW(plan_memory(d, c), Error);
  TransformerShape s;
  s.heads = 5;
  EXPECT_THROW(ModelDesc::from_transformer(s), Error);
}

}  // namespace
}  // namespace zs
