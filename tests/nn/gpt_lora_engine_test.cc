// The LoRA GPT ([Note: LoRA] in models/gpt/gpt_adapters.h) under the engine, at 1 and 2 ranks,
// GPT-2 and (the first two tests) the Llama form: with the same seed an adapted model (B = 0)
// starts at its base's loss bit for bit and its frozen base is the base model's initial parameters;
// training moves the adapters and leaves the base (frozen_hash) unchanged; stages 0 and 3 train the
// adapters to the same bits; and the memory plan (ModelDesc::from_model: trainable and frozen
// parameters, the model's activation plan) equals the tracker to the byte in every category, frozen
// base or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_specs.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "nn/threads.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "tests/nn/gemm_scratchpads.h"
#include "tests/nn/gpt_arch_cases.h"
#include "tests/nn/gpt_engine_test_helpers.h"

namespace zs::nn {
namespace {

using testing::engine_config;
using testing::rank_tokens;
using testing::tiny_archs;
using zs::testing::world;

GptConfig lora_config(DType dt, int rank, bool freeze,
                      const testing::ArchCase& arch = tiny_archs()[0]) {
  GptConfig c = testing::tiny_config(arch, dt);
  c.adapters.lora.rank = rank;
  c.adapters.lora.alpha = 16.0f;
  c.adapters.lora.freeze_base = freeze;
  return c;
}

// On GPT-2 and the Llama form, with adapters on every fused linear (qkv, proj, fc, fc_proj).
TEST(GptLoraEngine, StartsAtTheBaseAndTrainsOnlyTheAdapters) {
  for (const testing::ArchCase& arch : tiny_archs())
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(arch.name + " " + std::string(dtype_name(dt)));
      const GptConfig bc = lora_config(dt, 0, false, arch), lc = lora_config(dt, 4, true, arch);
      GptModel base(bc), lora(lc);
      MemoryTracker tb, tl;
      Engine eb(base, world(), engine_config(3, dt), &tb);
      Engine el(lora, world(), engine_config(3, dt), &tl);
      EXPECT_EQ(el.num_params(), lc.num_trainable_params());
      EXPECT_EQ(el.num_frozen_params(), bc.num_params());
      EXPECT_EQ(eb.num_params(), bc.num_params());
      // The frozen base holds the base model's initial values (fp32 storage: exactly).
      if (dt == DType::kF32) {
        for (size_t u = 0; u < el.num_units(); ++u)
          for (size_t f = 0; f < el.frozen_specs(u).size(); ++f)
            EXPECT_EQ(el.gather_frozen_param(u, f), eb.gather_master_param(u, f))
                << el.unit_name(u) << " " << el.frozen_specs(u)[f].name;
      }
      const auto tokens = rank_tokens(bc, 1, 3);
      base.set_tokens(tokens);
      lora.set_tokens(tokens);
      base.load_micro_batch(0);
      lora.load_micro_batch(0);
      eb.forward();
      el.forward();
      EXPECT_EQ(base.loss(), lora.loss());
      const uint64_t frozen = el.frozen_hash();
      double first = 0.0, last = 0.0;
      for (int s = 0; s < 10; ++s) {
        const StepStats st = el.step();
        if (s == 0) first = st.loss;
        last = st.loss;
      }
      EXPECT_EQ(el.frozen_hash(), frozen);
      if (world().rank() == 0)
        std::printf("%s %s: adapters only, loss %.4f -> %.4f in 10 AdamW steps\n",
                    arch.name.c_str(), std::string(dtype_name(dt)).c_str(), first, last);
      EXPECT_TRUE(std::isfinite(first));
      EXPECT_LT(last, first - 0.02);
    }
}

// Stages 0-3 train the same adapters to the same bits, frozen base or not (one micro-batch per
// step: with several, stages 2 and 3 reduce each micro-batch's gradient across ranks before
// accumulating, another summation order).
TEST(GptLoraEngine, StagesAgreeBitwise) {
  for (const testing::ArchCase& arch : tiny_archs())
    for (bool freeze : {true, false}) {
      SCOPED_TRACE(arch.name + (freeze ? " frozen base" : " all trainable"));
      const GptConfig c = lora_config(DType::kBF16, 4, freeze, arch);
      std::vector<uint64_t> hashes;
      std::vector<double> losses;
      for (int stage = 0; stage <= 3; ++stage) {
        GptModel m(c);
        Engine e(m, world(), engine_config(stage, DType::kBF16));
        const auto tokens = rank_tokens(c, 1, 7);
        m.set_tokens(tokens);
        double loss = 0.0;
        for (int s = 0; s < 3; ++s) loss = e.step().loss;
        hashes.push_back(e.param_hash());
        losses.push_back(loss);
      }
      for (int stage = 1; stage <= 3; ++stage) {
        EXPECT_EQ(hashes[stage], hashes[0]) << "stage " << stage;
        EXPECT_EQ(losses[stage], losses[0]) << "stage " << stage;
      }
    }
}

using testing::measured_gemm_scratchpads;

TEST(GptLoraEngine, PlanMatchesTrackerByteForByte) {
  constexpr MemCategory kAll[] = {
      MemCategory::kParams,      MemCategory::kGrads,       MemCategory::kMaster,
      MemCategory::kOptimizer,   MemCategory::kActivations, MemCategory::kCommBuffers,
      MemCategory::kHostOffload, MemCategory::kFrozen,      MemCategory::kOther};
  int checked = 0;
  for (int stage = 0; stage <= 3; ++stage)
    for (bool freeze : {true, false})
      for (bool ckpt : {false, true}) {
        SCOPED_TRACE("stage " + std::to_string(stage) + (freeze ? " frozen" : " trainable") +
                     (ckpt ? " ckpt" : ""));
        GptConfig g = lora_config(DType::kBF16, 8, freeze);
        g.run.checkpoint_activations = ckpt;
        g.adapters.lora.targets = {GptLoraTarget::kQkv, GptLoraTarget::kFc};
        MemoryTracker t;
        GptModel model(g, &t);
        EngineConfig ec = engine_config(stage, DType::kBF16, 2);
        ec.offload.optimizer = stage > 0;
        Engine engine(model, world(), ec, &t);
        PlanConfig pc;
        pc.engine = ec;
        pc.world = world().size();
        pc.rank = world().rank();
        pc.global_batch = static_cast<int64_t>(g.run.batch) * world().size() * ec.micro_batches;
        pc.checkpoint_activations = ckpt;
        const ModelDesc d = ModelDesc::from_model(model);
        EXPECT_EQ(d.num_params(), g.num_trainable_params());
        EXPECT_EQ(d.num_frozen_params(), g.num_params() - g.num_trainable_params());
        const MemoryPlan plan = plan_memory(d, pc);
        EXPECT_EQ(plan.activations.gemm_scratchpads, measured_gemm_scratchpads(g));
        for (MemCategory cat : kAll)
          EXPECT_EQ(plan.bytes(cat), t.current(cat)) << mem_category_name(cat);
        // A step allocates nothing: the peaks are still the plan.
        const auto tokens = rank_tokens(g, 2, 1);
        model.set_tokens(tokens);
        engine.step();
        for (MemCategory cat : kAll)
          EXPECT_EQ(plan.bytes(cat), t.peak(cat)) << "peak " << mem_category_name(cat);
        ++checked;
      }
  EXPECT_EQ(checked, 16);
}

}  // namespace
}  // namespace zs::nn
