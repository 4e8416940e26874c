// The planner reproduces the published memory arithmetic: 16 bytes/param of model states for
// fp32 training with Adam (and about 24 GB for a 1B model with activations and buffers), the
// ZeRO paper's 7.5B-parameter model on 64 ranks (120 / 31.4 / 16.6 / 1.9 GB for stages 0-3),
// parameter counts of GPT-2 and LLaMA-6.7B from their dimensions; --fit's search; and the GPT's
// activation figures (models/gpt/gpt_activations.h, what both models allocate from) as literals
// worked out independently. The model descriptions are built as zs_plan builds them
// (gpt_plan_shape.h): units and activations from nn, the rest from the runtime.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "gpt_plan_shape.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/transformer_shapes.h"
#include "planner/memory_plan.h"

namespace zs {
namespace {

using nn::transformer_activation_plan;
using nn::transformer_shape_by_name;
using nn::transformer_shape_names;
using nn::TransformerShape;
using test::transformer_desc;

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
  const ModelDesc d = transformer_desc(s, DType::kF32);
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
  // Tied heads: Hugging Face's counts of Qwen3-0.6B (16 heads of 128 on a width of 1024, q/k
  // norms) and Llama-3.2-1B.
  EXPECT_EQ(transformer_shape_by_name("qwen3-0.6b")->num_params(), 596'049'920);
  EXPECT_EQ(transformer_shape_by_name("llama-3.2-1b")->num_params(), 1'235'814'400);
  EXPECT_FALSE(transformer_shape_by_name("gpt5").has_value());
  for (const std::string& n : transformer_shape_names())
    EXPECT_TRUE(transformer_shape_by_name(n).has_value()) << n;
}

TEST(PlanArith, LlamaStage3On8RanksBf16) {
  const ModelDesc d = transformer_desc(*transformer_shape_by_name("llama-7b"), DType::kBF16);
  PlanConfig c = config(3, DType::kBF16, DType::kF32, 8);
  c.global_batch = 8;
  const MemoryPlan p = plan_memory(d, c);
  // bf16 params + fp32 grads + fp32 master + Adam: 2 + 4 + 12 = 18 bytes/param over 8 ranks.
  EXPECT_NEAR(p.model_states_bytes() / kGB, 18.0 * 6.738415616 / 8, 0.01);
  EXPECT_TRUE(p.activations.exact);  // the Llama form of nn::GptModel allocates exactly these
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
  const ActivationPlan full = transformer_activation_plan(s, 4, DType::kBF16, false);
  const ActivationPlan ck = transformer_activation_plan(s, 4, DType::kBF16, true);
  EXPECT_EQ(full.blocks, s.layers * full.per_layer);
  EXPECT_EQ(ck.blocks, s.layers * ck.per_layer_checkpointed);
  EXPECT_EQ(ck.recompute, full.per_layer - full.per_layer_checkpointed);
  EXPECT_LT(ck.blocks + ck.recompute, (full.blocks + full.recompute) / 3);
  EXPECT_EQ(full.total() - ck.total(),
            (s.layers - 1) * (full.per_layer - full.per_layer_checkpointed));
}

// Small GPTs whose CUDA figures (CudaGptModel's buffers) exercise every rounding: the padded
// pscratch stride, the column-sum chunks, a vocabulary wider than max(F, 3C).
struct SmallGpt {
  int L, H, C, T, V, F, B;
  DType dt;
};

constexpr SmallGpt kSmallGpts[] = {
    // M = 16; max(F, 3C) = 128; V < 128.
    {2, 2, 32, 16, 96, 128, 1, DType::kF32},
    // M = 96; max(F, 3C) = 256 < V = 300 (dwide_mm is V wide).
    {3, 4, 64, 32, 300, 256, 3, DType::kBF16},
    // M = 384 (2 column-sum chunks); max(F, 3C) = 288, pscratch stride padded to 320.
    {2, 3, 72, 128, 100, 288, 3, DType::kF16},
};

TransformerShape shape_of(const SmallGpt& d) {
  TransformerShape s;
  s.layers = d.L;
  s.heads = d.H;
  s.width = d.C;
  s.context = d.T;
  s.vocab = d.V;
  s.ffn = d.F;
  return s;
}

// The CUDA GPT's activations (CudaGptModel's buffers under kActivations, its cuBLASLt workspace
// included) and pinned host bytes: sums worked out independently of the code (a Python
// transcription of the constructor's buffer list), as literals. tests/nn/cuda_gpt_test.cc compares
// the same function with the model and the tracker on a GPU.
TEST(PlanArith, CudaGptActivationsAsWorkedOut) {
  const int64_t literal[3][2] = {
      {33'668'612, 33'635'588}, {35'226'884, 34'584'836}, {40'762'628, 38'765'828}};
  // Two staging slots of the ids' layout 4 (5 M + 1), row_loss_host 4 M, logits_host 4 V.
  const int64_t pinned[3] = {1'096, 5'432, 17'304};
  for (int i = 0; i < 3; ++i)
    for (int ck = 0; ck < 2; ++ck) {
      const SmallGpt& d = kSmallGpts[i];
      SCOPED_TRACE(std::string(dtype_name(d.dt)) + (ck ? " checkpointed" : ""));
      const TransformerShape s = shape_of(d);
      const ActivationPlan a =
          transformer_activation_plan(s, d.B, d.dt, ck != 0, DeviceKind::kCuda);
      EXPECT_TRUE(a.counted);
      EXPECT_TRUE(a.exact);
      EXPECT_EQ(a.checkpointed, ck != 0);
      EXPECT_EQ(a.total(), literal[i][ck]);
      EXPECT_EQ(a.gemm_workspace, 32 << 20);
      EXPECT_EQ(a.pinned_host, pinned[i]);
      // One more block adds per_layer (per_layer_checkpointed with checkpointing).
      TransformerShape s1 = s;
      s1.layers += 1;
      const ActivationPlan a1 =
          transformer_activation_plan(s1, d.B, d.dt, ck != 0, DeviceKind::kCuda);
      EXPECT_EQ(a1.total() - a.total(), ck ? a.per_layer_checkpointed : a.per_layer);
    }
}

// The CPU figures (GptModel's buffers: 16-bit products only for bf16, no cuBLASLt workspace), as
// the planner had them before it had a device, with and without naming kCpu; oneDNN's scratchpads
// (this CPU's, [Note: GEMM scratchpads] in nn/gemm.h) apart.
TEST(PlanArith, CpuGptActivationsUnchanged) {
  const int64_t before[3][2] = {{113'856, 80'832}, {1'688'368, 1'046'320}, {7'339'408, 5'084'560}};
  for (int i = 0; i < 3; ++i)
    for (int ck = 0; ck < 2; ++ck) {
      const SmallGpt& d = kSmallGpts[i];
      const ActivationPlan a = transformer_activation_plan(shape_of(d), d.B, d.dt, ck != 0);
      const ActivationPlan c =
          transformer_activation_plan(shape_of(d), d.B, d.dt, ck != 0, DeviceKind::kCpu);
      EXPECT_EQ(a.total() - a.gemm_scratchpads, before[i][ck]) << i << " " << ck;
      EXPECT_EQ(c.total() - c.gemm_scratchpads, before[i][ck]) << i << " " << ck;
      EXPECT_EQ(a.gemm_workspace, 0);
      EXPECT_EQ(a.pinned_host, 0);
    }
  const TransformerShape gpt2 = *transformer_shape_by_name("gpt2");
  auto sized = [&gpt2](DType dt) {
    const ActivationPlan a = transformer_activation_plan(gpt2, 1, dt, false);
    return a.total() - a.gemm_scratchpads;
  };
  EXPECT_EQ(sized(DType::kF32), 1'708'212'548);
  EXPECT_EQ(sized(DType::kBF16), 1'947'978'052);
  EXPECT_EQ(sized(DType::kF16), 1'862'602'052);
}

// plan_memory on CUDA: the CUDA GPT's activations, the engine's device control buffer (comm
// buffers, 8 max(world, 2 + units) bytes), the model's pinned host bytes under kOther; LLaMA's
// estimate does not depend on the device.
TEST(PlanArith, CudaPlanAddsDeviceBuffers) {
  const TransformerShape gpt2 = *transformer_shape_by_name("gpt2");
  const ModelDesc d = transformer_desc(gpt2, DType::kBF16);
  const ModelDesc d_cuda = transformer_desc(gpt2, DType::kBF16, DeviceKind::kCuda);
  PlanConfig c = config(3, DType::kBF16, DType::kBF16, 8);
  const MemoryPlan cpu = plan_memory(d, c);
  c.device = DeviceKind::kCuda;
  const MemoryPlan gpu = plan_memory(d_cuda, c);
  const int64_t units = 14;  // embed, 12 blocks, head
  EXPECT_EQ(gpu.bytes(MemCategory::kCommBuffers) - cpu.bytes(MemCategory::kCommBuffers),
            8 * std::max<int64_t>(8, 2 + units));
  for (MemCategory m : {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster,
                        MemCategory::kOptimizer, MemCategory::kHostOffload})
    EXPECT_EQ(gpu.bytes(m), cpu.bytes(m)) << mem_category_name(m);
  EXPECT_EQ(gpu.bytes(MemCategory::kActivations),
            transformer_activation_plan(gpt2, 1, DType::kBF16, false, DeviceKind::kCuda).total());
  EXPECT_EQ(cpu.bytes(MemCategory::kOther), 0);
  EXPECT_EQ(gpu.bytes(MemCategory::kOther), gpu.activations.pinned_host);
  EXPECT_EQ(gpu.device_bytes() - cpu.device_bytes(),
            gpu.bytes(MemCategory::kActivations) - cpu.bytes(MemCategory::kActivations) +
                gpu.bytes(MemCategory::kCommBuffers) - cpu.bytes(MemCategory::kCommBuffers));
  // With offload, the device engine stages each unit's gradient and parameter shard in pinned
  // host memory (kHostOffload).
  c.engine.offload.optimizer = true;
  const MemoryPlan gpu_off = plan_memory(d_cuda, c);
  c.device = DeviceKind::kCpu;
  const MemoryPlan cpu_off = plan_memory(d, c);
  EXPECT_GT(gpu_off.buffers.host_staging_bytes, 0);
  EXPECT_EQ(gpu_off.host_bytes() - cpu_off.host_bytes(), gpu_off.buffers.host_staging_bytes);

  const TransformerShape llama = *transformer_shape_by_name("llama-7b");
  // The CUDA model is GPT-2's: a Llama is refused naming the first component it lacks.
  try {
    c.device = DeviceKind::kCuda;
    plan_memory(transformer_desc(llama, DType::kBF16, DeviceKind::kCuda), c);
    ADD_FAILURE() << "a llama planned on cuda";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("RMSNorm"), std::string::npos) << e.what();
  }
}

TEST(PlanArith, FitListsCheapestFirstAndAllFit) {
  const ModelDesc d = transformer_desc(*transformer_shape_by_name("gpt2-xl"), DType::kBF16);
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
  EXPECT_THROW(transformer_desc(s, DType::kF32), Error);
  EXPECT_THROW(transformer_activation_plan(s, 1, DType::kF32, false), Error);
  EXPECT_THROW(
      transformer_activation_plan(*transformer_shape_by_name("gpt2"), 0, DType::kF32, false),
      Error);
}

}  // namespace
}  // namespace zs
