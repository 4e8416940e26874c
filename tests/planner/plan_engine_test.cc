// The memory plan equals what the engine and the GPT model allocate, to the byte, category by
// category (run at 1, 2 and 4 ranks): the test MLP under stages 0-3, fp32/bf16 compute, fp32 or
// compute-dtype gradients, AdamW/SGD, offload on/off, 1 or 2 micro-batches, and AdamW with bf16
// and int8 states (block 64; the parameters under 100 elements keep fp32 states); GptModel's
// activations with and without checkpointing, alone and under the engine (GPT-2 and the Llama
// form: RMSNorm, rotary, SwiGLU, grouped-query attention, biases per projection), both as the model
// reports them (ModelDesc::from_model, Model::activation_plan()) and as zs_plan computes them from
// a transformer shape (models/gpt/transformer_shapes.h).
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../runtime/mlp_model.h"
#include "../runtime/test_world.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "core/memory_tracker.h"
#include "gpt_plan_shape.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/transformer_shapes.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/linear.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "tests/nn/gemm_scratchpads.h"
#include "tests/nn/gpt_arch_cases.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;

using testing::world;

constexpr MemCategory kAll[] = {MemCategory::kParams,      MemCategory::kGrads,
                                MemCategory::kMaster,      MemCategory::kOptimizer,
                                MemCategory::kActivations, MemCategory::kCommBuffers,
                                MemCategory::kHostOffload, MemCategory::kOther};

// The model's own description: each unit's parameter sizes and its activation_plan().
ModelDesc describe(Model& model) { return ModelDesc::from_model(model); }

struct Case {
  int stage;
  DType p, g;
  OptimizerKind opt;
  bool offload;
  int micro_batches;
  optim::StateDType states = optim::StateDType::kF32;
};

std::string name(const Case& c) {
  return fmt::format("stage {} {}/{} {} {} states offload {} mb {} N {}", c.stage, dtype_name(c.p),
                     dtype_name(c.g), c.opt == OptimizerKind::kAdamW ? "adamw" : "sgd",
                     optim::state_dtype_name(c.states), c.offload, c.micro_batches, world().size());
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int stage = 0; stage <= 3; ++stage)
    for (DType p : {DType::kF32, DType::kBF16})
      for (DType g : {DType::kF32, DType::kBF16})
        for (OptimizerKind opt : {OptimizerKind::kAdamW, OptimizerKind::kSgd})
          for (bool offload : {false, true})
            for (int mb : {1, 2}) {
              if (g != DType::kF32 && g != p) continue;  // the engine's rule
              if (offload && (stage == 0 || opt != OptimizerKind::kAdamW)) continue;
              cases.push_back({stage, p, g, opt, offload, mb});
            }
  for (optim::StateDType states : {optim::StateDType::kBF16, optim::StateDType::kI8})
    for (int stage = 0; stage <= 3; ++stage)
      for (DType p : {DType::kF32, DType::kBF16})
        for (bool offload : {false, true}) {
          if (offload && stage == 0) continue;
          cases.push_back({stage, p, DType::kF32, OptimizerKind::kAdamW, offload, 1, states});
        }
  return cases;
}

EngineConfig engine_config(const Case& c) {
  EngineConfig e;
  e.stage = zero_stage_from_int(c.stage);
  e.precision.param_dtype = c.p;
  e.precision.grad_dtype = c.g;
  e.optimizer.kind = c.opt;
  e.offload.optimizer = c.offload;
  e.micro_batches = c.micro_batches;
  e.optimizer.schedule.lr = 1e-2f;
  e.optimizer.state_dtype = c.states;
  e.optimizer.state_block = 64;
  e.optimizer.state_min_numel = 100;
  return e;
}

TEST(Plan, MatchesEngineTrackerByteForByte) {
  const int N = world().size();
  int checked = 0;
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(name(c));
    const EngineConfig ec = engine_config(c);
    MlpShape shape;
    shape.global_batch = 8;
    MlpModel model(shape, N, world().rank(), c.micro_batches);
    MemoryTracker t;
    Engine engine(model, world(), ec, &t);

    PlanConfig pc;
    pc.engine = ec;
    pc.world = N;
    pc.rank = world().rank();
    const MemoryPlan plan = plan_memory(describe(model), pc);
    for (MemCategory cat : kAll)
      EXPECT_EQ(plan.bytes(cat), t.current(cat)) << mem_category_name(cat);
    EXPECT_EQ(plan.num_params, engine.num_params());
    EXPECT_EQ(plan.num_padded_params, engine.num_padded_params());
    EXPECT_EQ(plan.padding_bytes(), engine.padding_bytes());
    // A step allocates nothing: the peak after a step is still the plan.
    model.set_step(0);
    engine.step();
    for (MemCategory cat : kAll)
      EXPECT_EQ(plan.bytes(cat), t.peak(cat)) << "peak " << mem_category_name(cat);
    EXPECT_EQ(plan.device_bytes() + plan.host_bytes(), t.peak_total());
    ++checked;
  }
  if (world().rank() == 0) std::printf("checked %d configurations at N=%d\n", checked, N);
  EXPECT_GE(checked, 40);
}

// Stages 0-3 on the MLP: model states per rank follow P Psi_p + G Psi_g + K Psi_o.
TEST(Plan, ModelStatesFollowZeroFormula) {
  const int N = world().size();
  MlpModel model(MlpShape{}, N, world().rank(), 1);
  const ModelDesc d = describe(model);
  for (int stage = 0; stage <= 3; ++stage) {
    Case c{stage, DType::kBF16, DType::kBF16, OptimizerKind::kAdamW, false, 1};
    PlanConfig pc;
    pc.engine = engine_config(c);
    pc.world = N;
    pc.rank = world().rank();
    const MemoryPlan plan = plan_memory(d, pc);
    const int64_t psi = plan.num_padded_params, shard = psi / N;
    const int64_t psi_p = stage == 3 ? shard : psi, psi_g = stage >= 2 ? shard : psi,
                  psi_o = stage >= 1 ? shard : psi;
    EXPECT_EQ(plan.model_states_bytes(), 2 * psi_p + 2 * psi_g + 12 * psi_o) << stage;
  }
}

// GPT-2 at 2 heads of 16, and the Llama form (tests/nn/gpt_arch_cases.h) at 4 heads of 8: all-Llama
// with 1 and 2 key/value heads (ffn 84, not a multiple of the width), Qwen2-like (qkv biases),
// tied embeddings in both families, and Qwen3 (q/k norms, 4 heads of 12 on a width of 32).
std::vector<nn::testing::ArchCase> plan_archs() {
  nn::GptArchitecture base;
  base.width = 32;
  base.heads = 4;
  return nn::testing::gpt2_and(
      base, {"llama_kv1", "llama_kv2", "qwen2", "llama_tied", "gpt2_tied", "qwen3"});
}

nn::GptConfig gpt_config(const nn::testing::ArchCase& arch, bool ckpt, DType dtype, int batch,
                         int64_t head_chunk = nn::kGptHeadChunkAuto) {
  nn::GptConfig g = nn::testing::tiny_config(arch, dtype);
  g.arch.vocab = 96;
  g.run.batch = batch;
  g.run.checkpoint_activations = ckpt;
  g.run.head_chunk = head_chunk;
  return g;
}

// What zs_plan asks nn for the same GPT: the activations of its transformer shape.
ActivationPlan shape_activations(const nn::GptConfig& g) {
  return nn::transformer_activation_plan(nn::transformer_shape_of(g.arch, g.adapters), g.run.batch,
                                         g.run.compute_dtype, g.run.checkpoint_activations,
                                         DeviceKind::kCpu, nn::this_process_cpu_gemm(),
                                         g.run.threads, g.run.head_chunk);
}

using nn::testing::measured_gemm_scratchpads;

TEST(Plan, GptActivationsMatchModel) {
  for (const nn::testing::ArchCase& arch : plan_archs())
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
      for (bool ckpt : {false, true})
        for (int batch : {1, 3}) {
          const nn::GptConfig g = gpt_config(arch, ckpt, dt, batch);
          SCOPED_TRACE(
              fmt::format("{} {} ckpt {} batch {}", arch.name, dtype_name(dt), ckpt, batch));
          MemoryTracker t;
          nn::GptModel model(g, &t);
          const ActivationPlan a = model.activation_plan();
          EXPECT_TRUE(a.counted);
          EXPECT_TRUE(a.exact);
          EXPECT_EQ(a.checkpointed, ckpt);
          EXPECT_EQ(a.micro_batch, batch);
          EXPECT_EQ(a.total(), model.activation_bytes());
          EXPECT_EQ(shape_activations(g).total(), a.total()) << "zs_plan's route";
          EXPECT_EQ(t.current(MemCategory::kActivations), a.total());
          EXPECT_EQ(a.gemm_scratchpads, measured_gemm_scratchpads(g));
          // Per-layer figures: the model grows by exactly per_layer (or per_layer_checkpointed)
          // per extra block.
          nn::GptConfig g3 = g;
          g3.arch.layers = 3;
          MemoryTracker t3;
          nn::GptModel m3(g3, &t3);
          EXPECT_EQ(m3.activation_bytes() - model.activation_bytes(),
                    ckpt ? a.per_layer_checkpointed : a.per_layer);
        }
}

// The LM head in row chunks ([Note: chunked head] in nn/lm_head.h): chunks that divide the 48 rows
// and chunks that do not, the logits buffer one chunk's rows, every figure as allocated.
TEST(Plan, ChunkedHeadActivationsMatchModel) {
  for (const nn::testing::ArchCase& arch : plan_archs())
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
      for (int64_t chunk : {int64_t{5}, int64_t{16}}) {
        const nn::GptConfig g = gpt_config(arch, false, dt, 3, chunk);
        SCOPED_TRACE(fmt::format("{} {} head chunk {}", arch.name, dtype_name(dt), chunk));
        MemoryTracker t;
        nn::GptModel model(g, &t);
        const ActivationPlan a = model.activation_plan();
        EXPECT_EQ(a.total(), model.activation_bytes());
        EXPECT_EQ(shape_activations(g).total(), a.total()) << "zs_plan's route";
        EXPECT_EQ(t.current(MemCategory::kActivations), a.total());
        EXPECT_EQ(a.gemm_scratchpads, measured_gemm_scratchpads(g));
        const nn::GptBufferTable table =
            nn::gpt_buffer_table(nn::GptActivationDims::of(g), DeviceKind::kCpu);
        EXPECT_EQ(table.row("logits"), chunk * 96 * 4);
        const ActivationPlan whole = shape_activations(gpt_config(arch, false, dt, 3, 0));
        EXPECT_EQ(whole.head - a.head, (48 - chunk) * 96 * 4);
      }
}

// GptModel under the engine: every category, activations included, as planned.
TEST(Plan, GptUnderEngineMatchesTracker) {
  const int N = world().size();
  for (const nn::testing::ArchCase& arch : plan_archs())
    for (int stage : {0, 1, 2, 3})
      for (bool ckpt : {false, true})
        for (int mb : {1, 2}) {
          // The LM head in chunks of 5 of its 32 rows with more micro-batches.
          const int64_t chunk = mb == 2 ? 5 : nn::kGptHeadChunkAuto;
          const nn::GptConfig g = gpt_config(arch, ckpt, DType::kBF16, 2, chunk);
          SCOPED_TRACE(fmt::format("{} stage {} ckpt {} mb {} head chunk {}", arch.name, stage,
                                   ckpt, mb, chunk));
          MemoryTracker t;
          nn::GptModel model(g, &t);
          Case c{stage, DType::kBF16, DType::kF32, OptimizerKind::kAdamW, stage > 0, mb};
          const EngineConfig ec = engine_config(c);
          Engine engine(model, world(), ec, &t);
          PlanConfig pc;
          pc.engine = ec;
          pc.world = N;
          pc.rank = world().rank();
          pc.global_batch = static_cast<int64_t>(g.run.batch) * N * mb;
          pc.checkpoint_activations = ckpt;
          // As the model reports itself, and as zs_plan describes it from its shape.
          const ModelDesc d = describe(model);
          const ModelDesc ds = test::transformer_desc(
              nn::transformer_shape_of(g.arch, g.adapters), g.run.compute_dtype, DeviceKind::kCpu,
              nn::this_process_cpu_gemm(), g.run.threads, g.run.head_chunk);
          EXPECT_EQ(ds.units, d.units);
          EXPECT_EQ(d.num_params(), g.num_params());
          const MemoryPlan plan = plan_memory(d, pc);
          const MemoryPlan plan_s = plan_memory(ds, pc);
          for (MemCategory cat : kAll) {
            EXPECT_EQ(plan.bytes(cat), t.current(cat)) << mem_category_name(cat);
            EXPECT_EQ(plan_s.bytes(cat), plan.bytes(cat)) << mem_category_name(cat);
          }
          // The model's own plan holds for the micro-batch it was built with, nothing else.
          pc.global_batch *= 2;
          EXPECT_THROW(plan_memory(d, pc), Error);
        }
}

}  // namespace
}  // namespace zs
