// The memory plan of a LoRA fine-tune on a frozen base, described as zs_plan describes it (a
// transformer shape with adapters, models/gpt/transformer_shapes.h, split into trainable parameters
// and frozen ones with their rows: gpt_plan_shape.h), equals what the engine and GptModel allocate,
// to the byte, in every category: stages 0-3, fp32 and bf16 compute, the frozen base stored in the
// compute dtype, in fp32 under bf16 compute, and in int8 (one fp32 scale per row; computed by the
// int8 GEMM where this CPU has it, or dequantized: [Note: int8 base compute]), activation
// checkpointing on and off, offload and micro-batches in some, at 1 and 2 ranks; GPT-2 and the
// Llama form (RMSNorm, rotary, SwiGLU, grouped-query attention; Qwen2-like qkv biases). The shape's
// description is the built model's (ModelDesc::from_model) parameter for parameter.
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/memory_tracker.h"
#include "gpt_plan_shape.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/transformer_shapes.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "nn/threads.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "tests/nn/gemm_scratchpads.h"
#include "tests/nn/gpt_arch_cases.h"

namespace zs {
namespace {

Communicator& world() {
  static std::unique_ptr<MpiCommunicator> w = MpiCommunicator::world();
  return *w;
}

constexpr MemCategory kAll[] = {
    MemCategory::kParams,      MemCategory::kGrads,       MemCategory::kMaster,
    MemCategory::kOptimizer,   MemCategory::kFrozen,      MemCategory::kActivations,
    MemCategory::kCommBuffers, MemCategory::kHostOffload, MemCategory::kOther};

using nn::testing::tiny_archs;

// GPT-2 and the Llama form (tests/nn/gpt_arch_cases.h: tiny_archs()).
nn::GptConfig lora_gpt(DType dt, std::vector<nn::GptLoraTarget> targets, bool ckpt,
                       const nn::testing::ArchCase& arch = tiny_archs()[0]) {
  nn::GptConfig c = nn::testing::tiny_config(arch, dt);
  c.run.checkpoint_activations = ckpt;
  c.adapters.lora.rank = 4;
  c.adapters.lora.alpha = 8.0f;
  c.adapters.lora.targets = std::move(targets);
  return c;
}

using nn::testing::measured_gemm_scratchpads;

std::vector<int32_t> rank_tokens(const nn::GptConfig& c, int micro_batches) {
  std::mt19937 rng(17 + static_cast<uint32_t>(world().rank()));
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// zs_plan's description of the shape is the built model's: the same trainable sizes per unit and
// the same frozen parameters with the same rows, adapters on every target subset, frozen base or
// not.
TEST(PlanLora, ShapeDescribesTheModel) {
  for (const nn::testing::ArchCase& arch : tiny_archs())
    for (bool freeze : {true, false})
      for (const char* targets : {"qkv,proj,fc,fc_proj", "qkv,fc", "fc_proj"}) {
        nn::GptConfig g = lora_gpt(DType::kBF16, nn::parse_gpt_lora_targets(targets), false, arch);
        g.adapters.lora.freeze_base = freeze;
        SCOPED_TRACE(fmt::format("{} freeze {} targets {}", arch.name, freeze, targets));
        nn::GptModel model(g);
        const ModelDesc built = ModelDesc::from_model(model);
        const nn::TransformerShape shape = nn::transformer_shape_of(g.arch, g.adapters);
        const ModelDesc d = test::transformer_desc(shape, g.run.compute_dtype);
        EXPECT_EQ(d.units, built.units);
        ASSERT_EQ(d.frozen.size(), built.frozen.size());
        for (size_t u = 0; u < d.frozen.size(); ++u) {
          ASSERT_EQ(d.frozen[u].size(), built.frozen[u].size()) << "unit " << u;
          for (size_t i = 0; i < d.frozen[u].size(); ++i) {
            EXPECT_EQ(d.frozen[u][i].numel, built.frozen[u][i].numel) << u << "." << i;
            EXPECT_EQ(d.frozen[u][i].rows, built.frozen[u][i].rows) << u << "." << i;
          }
        }
        EXPECT_EQ(shape.num_params(), g.num_params());
        EXPECT_EQ(shape.num_trainable_params(), g.num_trainable_params());
        EXPECT_EQ(d.num_params(), g.num_trainable_params());
        EXPECT_EQ(d.num_frozen_params(), g.num_params() - g.num_trainable_params());
      }
}

using I8 = FrozenPolicy::Int8Compute;

struct Case {
  nn::testing::ArchCase arch;
  int stage;
  DType compute;
  std::optional<DType> storage;  // unset: the compute dtype
  bool ckpt;
  I8 int8 = I8::kAuto;  // int8 storage: kAuto (the int8 GEMM where this CPU has it) or kDequantize
};

std::string name(const Case& c) {
  return fmt::format("{} stage {} {} base {}{} ckpt {} N {}", c.arch.name, c.stage,
                     dtype_name(c.compute), c.storage ? dtype_name(*c.storage) : "(compute)",
                     c.storage == DType::kI8 ? fmt::format(" {}", int8_compute_name(c.int8)) : "",
                     c.ckpt, world().size());
}

TEST(PlanLora, MatchesTrackerByteForByte) {
  const int N = world().size();
  std::vector<Case> cases;
  const std::vector<nn::testing::ArchCase> archs = tiny_archs();
  for (int stage = 0; stage <= 3; ++stage)
    for (bool ckpt : {false, true}) {
      for (DType dt : {DType::kF32, DType::kBF16}) {
        cases.push_back({archs[0], stage, dt, std::nullopt, ckpt});
        cases.push_back({archs[0], stage, dt, DType::kI8, ckpt, I8::kAuto});
        cases.push_back({archs[0], stage, dt, DType::kI8, ckpt, I8::kDequantize});
      }
      cases.push_back({archs[0], stage, DType::kBF16, DType::kF32, ckpt});
      // The Llama form: bf16 with the base in bf16 and in int8 (int8 GEMM where this CPU has it),
      // fp32 with a dequantized int8 base; the Qwen2-like form (qkv biases in Int8Linear) likewise
      // on alternate stages.
      const nn::testing::ArchCase& llama = archs[1 + stage % 2];
      cases.push_back({llama, stage, DType::kBF16, std::nullopt, ckpt});
      cases.push_back({llama, stage, DType::kBF16, DType::kI8, ckpt, I8::kAuto});
      cases.push_back({llama, stage, DType::kF32, DType::kI8, ckpt, I8::kDequantize});
    }
  int checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    // Every target at stages 0 and 2, two of them at 1 and 3; offload at stage 2, two
    // micro-batches at stages 1 and 3.
    nn::GptConfig g = lora_gpt(
        c.compute, nn::parse_gpt_lora_targets(c.stage % 2 == 0 ? "qkv,proj,fc,fc_proj" : "qkv,fc"),
        c.ckpt, c.arch);
    // As zs_train maps --int8-compute: the model accepts int8 records unless told to dequantize.
    g.adapters.int8.accept = c.storage == DType::kI8 && c.int8 != I8::kDequantize;
    EngineConfig ec;
    ec.stage = zero_stage_from_int(c.stage);
    ec.precision.param_dtype = c.compute;
    ec.precision.grad_dtype = DType::kF32;
    ec.optimizer.schedule.lr = 1e-2f;
    ec.frozen.storage = c.storage;
    ec.frozen.int8_compute = c.int8;
    ec.offload.optimizer = c.stage == 2;
    ec.micro_batches = c.stage % 2 == 1 ? 2 : 1;
    MemoryTracker t;
    nn::GptModel model(g, &t);
    Engine engine(model, world(), ec, &t);

    PlanConfig pc;
    pc.engine = ec;
    pc.world = N;
    pc.rank = world().rank();
    pc.global_batch = static_cast<int64_t>(g.run.batch) * N * ec.micro_batches;
    pc.checkpoint_activations = c.ckpt;
    const ModelDesc d =
        test::transformer_desc(nn::transformer_shape_of(g.arch, g.adapters), g.run.compute_dtype,
                               DeviceKind::kCpu, nn::this_process_cpu_gemm(), g.run.threads);
    const MemoryPlan plan = plan_memory(d, pc);
    EXPECT_EQ(plan.num_params, engine.num_params());
    EXPECT_EQ(plan.num_frozen_params, engine.num_frozen_params());
    EXPECT_GT(plan.bytes(MemCategory::kFrozen), 0);
    EXPECT_EQ(plan.activations.gemm_scratchpads, measured_gemm_scratchpads(g));
    for (MemCategory cat : kAll)
      EXPECT_EQ(plan.bytes(cat), t.current(cat)) << mem_category_name(cat);
    // A step allocates nothing: the peaks are still the plan.
    const auto tokens = rank_tokens(g, ec.micro_batches);
    model.set_tokens(tokens);
    engine.step();
    for (MemCategory cat : kAll)
      EXPECT_EQ(plan.bytes(cat), t.peak(cat)) << "peak " << mem_category_name(cat);
    ++checked;
  }
  if (world().rank() == 0) std::printf("checked %d configurations at N=%d\n", checked, N);
  EXPECT_EQ(checked, 80);
}

}  // namespace
}  // namespace zs
