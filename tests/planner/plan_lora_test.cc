// The memory plan of a LoRA fine-tune on a frozen base, described as zs_plan describes it (a
// transformer shape with adapters, nn/transformer_shapes.h, split into trainable parameters and
// frozen ones with their rows: gpt_plan_shape.h), equals what the engine and GptModel allocate,
// to the byte, in every category: stages 0-3, fp32 and bf16 compute, the frozen base stored in the
// compute dtype, in fp32 under bf16 compute, and in int8 (one fp32 scale per row; computed by the
// int8 GEMM where this CPU has it, or dequantized: [Note: int8 base compute]), activation
// checkpointing on and off, offload and micro-batches in some, at 1 and 2 ranks. The shape's
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
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/gpt.h"
#include "nn/gpt_activations.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "nn/threads.h"
#include "nn/transformer_shapes.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"

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

nn::GptConfig lora_gpt(DType dt, std::vector<nn::GptLoraTarget> targets, bool ckpt) {
  nn::GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 2;
  c.arch.width = 32;
  c.arch.context = 16;
  c.arch.vocab = 64;
  c.run.batch = 2;
  c.run.threads = 1;
  c.run.compute_dtype = dt;
  c.run.checkpoint_activations = ckpt;
  c.adapters.lora.rank = 4;
  c.adapters.lora.alpha = 8.0f;
  c.adapters.lora.targets = std::move(targets);
  return c;
}

// oneDNN's scratchpads of the products GptModel builds (the library's choice, not planned),
// measured by building the same layers, adapters and int8 linears over the workspaces GptModel
// shares, which must be the planned ones (as gpt_lora_engine_test measures them).
int64_t measured_gemm_scratchpads(const nn::GptConfig& g) {
  nn::ThreadScope scope(g.run.threads);
  MemoryTracker t;
  const DType mm = g.run.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const int64_t M = static_cast<int64_t>(g.run.batch) * g.arch.context;
  const int C = g.arch.width, F = g.arch.ffn_mult * g.arch.width;
  nn::GemmWorkspace ws(&t);
  nn::Linear a(M, C, 3 * C, true, false, mm, &t, &ws), b(M, C, C, true, true, mm, &t, &ws),
      c(M, C, F, true, false, mm, &t, &ws), d(M, F, C, true, true, mm, &t, &ws),
      e(M, C, g.arch.vocab, false, false, mm, &t, &ws);
  nn::Attention at(g.run.batch, g.arch.context, C, g.arch.heads, mm, &t, &ws);
  std::vector<nn::LoraAdapter> adapters;
  for (int k = 0; k < nn::kNumGptLoraTargets; ++k) {
    const auto target = static_cast<nn::GptLoraTarget>(k);
    if (!g.adapters.lora.targets_linear(target)) continue;
    int64_t in = 0, out = 0;
    nn::gpt_lora_linear_shape(target, g.arch, &in, &out);
    adapters.emplace_back(M, in, out, g.adapters.lora.rank, g.adapters.lora.scaling(), mm, &t, &ws);
  }
  // [Note: int8 base compute] the four Int8Linears over their own workspace, as nn/gpt.cc builds
  // them.
  nn::GemmWorkspace int8_ws(&t);
  std::vector<nn::Int8Linear> int8;
  const nn::GptActivationDims dims = nn::GptActivationDims::of(g);
  for (int k = 0; k < nn::kNumGptLinears && g.adapters.int8.accept; ++k)
    int8.emplace_back(nn::gpt_int8_linear_desc(dims, static_cast<nn::GptLoraTarget>(k)), &t, &ws,
                      &int8_ws);
  EXPECT_EQ(static_cast<int64_t>(ws.size()),
            nn::gpt_cpu_gemm_workspace_bytes(dims, nn::this_process_cpu_gemm()));
  EXPECT_EQ(static_cast<int64_t>(int8_ws.size()), nn::gpt_cpu_bytes(dims).int8_ws);
  return t.current(MemCategory::kActivations) - static_cast<int64_t>(ws.size()) -
         static_cast<int64_t>(int8_ws.size());
}

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
  for (bool freeze : {true, false})
    for (const char* targets : {"qkv,proj,fc,fc_proj", "qkv,fc", "fc_proj"}) {
      nn::GptConfig g = lora_gpt(DType::kBF16, nn::parse_gpt_lora_targets(targets), false);
      g.adapters.lora.freeze_base = freeze;
      SCOPED_TRACE(fmt::format("freeze {} targets {}", freeze, targets));
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
  int stage;
  DType compute;
  std::optional<DType> storage;  // unset: the compute dtype
  bool ckpt;
  I8 int8 = I8::kAuto;  // int8 storage: kAuto (the int8 GEMM where this CPU has it) or kDequantize
};

std::string name(const Case& c) {
  return fmt::format("stage {} {} base {}{} ckpt {} N {}", c.stage, dtype_name(c.compute),
                     c.storage ? dtype_name(*c.storage) : "(compute)",
                     c.storage == DType::kI8 ? fmt::format(" {}", int8_compute_name(c.int8)) : "",
                     c.ckpt, world().size());
}

TEST(PlanLora, MatchesTrackerByteForByte) {
  const int N = world().size();
  std::vector<Case> cases;
  for (int stage = 0; stage <= 3; ++stage)
    for (bool ckpt : {false, true}) {
      for (DType dt : {DType::kF32, DType::kBF16}) {
        cases.push_back({stage, dt, std::nullopt, ckpt});
        cases.push_back({stage, dt, DType::kI8, ckpt, I8::kAuto});
        cases.push_back({stage, dt, DType::kI8, ckpt, I8::kDequantize});
      }
      cases.push_back({stage, DType::kBF16, DType::kF32, ckpt});
    }
  int checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    // Every target at stages 0 and 2, two of them at 1 and 3; offload at stage 2, two
    // micro-batches at stages 1 and 3.
    nn::GptConfig g = lora_gpt(
        c.compute, nn::parse_gpt_lora_targets(c.stage % 2 == 0 ? "qkv,proj,fc,fc_proj" : "qkv,fc"),
        c.ckpt);
    // As train_gpt maps --int8-compute: the model accepts int8 records unless told to dequantize.
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
                               DeviceKind::kCpu, nn::this_process_cpu_gemm());
    const MemoryPlan plan = plan_memory(d, pc);
    EXPECT_EQ(plan.num_params, engine.num_params());
    EXPECT_EQ(plan.num_frozen_params, engine.num_frozen_params());
    EXPECT_GT(plan.bytes(MemCategory::kFrozen), 0);
    const int64_t scratch = measured_gemm_scratchpads(g);
    for (MemCategory cat : kAll) {
      const int64_t extra = cat == MemCategory::kActivations ? scratch : 0;
      EXPECT_EQ(plan.bytes(cat) + extra, t.current(cat)) << mem_category_name(cat);
    }
    // A step allocates nothing: the peaks are still the plan.
    const auto tokens = rank_tokens(g, ec.micro_batches);
    model.set_tokens(tokens);
    engine.step();
    for (MemCategory cat : kAll) {
      const int64_t extra = cat == MemCategory::kActivations ? scratch : 0;
      EXPECT_EQ(plan.bytes(cat) + extra, t.peak(cat)) << "peak " << mem_category_name(cat);
    }
    ++checked;
  }
  if (world().rank() == 0) std::printf("checked %d configurations at N=%d\n", checked, N);
  EXPECT_EQ(checked, 56);
}

}  // namespace
}  // namespace zs
