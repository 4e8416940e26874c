// GptModel's Llama form (tests/nn/gpt_arch_cases.h: RMSNorm, rotary, SwiGLU, grouped-query
// attention, no biases; Qwen2-like with qkv biases) under the engine, at 1, 2 and 4 ranks: stages
// 0-3 train to the same bits (fp32 and bf16, checkpointing too); LoRA on our fused targets (qkv,
// proj, fc, fc_proj) over a frozen base agrees across stages (its start at the base's loss and its
// frozen base: gpt_lora_engine_test); an int8 frozen base (the int8 GEMM where this CPU has it, on
// Int8Linears without biases) trains, agrees across stages and stays within 0.1% of the loss of the
// dequantized base (bitwise where the int8 GEMM is absent).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/gpt/gpt.h"
#include "nn/int8_linear.h"
#include "runtime/engine.h"
#include "tests/nn/gpt_arch_cases.h"
#include "tests/nn/gpt_engine_test_helpers.h"

namespace zs::nn {
namespace {

using testing::engine_config;
using testing::rank_tokens;
using zs::testing::world;

// All-Llama with 2 key/value heads of 4 and ffn 84, Qwen2-like, tied Llama and Qwen3 (q/k norms,
// 4 heads of 12 on a width of 32): tiny_archs() less GPT-2.
std::vector<testing::ArchCase> archs() {
  std::vector<testing::ArchCase> v = testing::tiny_archs();
  v.erase(v.begin());
  return v;
}

GptConfig llama_config(const testing::ArchCase& arch, DType dt, int lora_rank = 0) {
  GptConfig c = testing::tiny_config(arch, dt);
  if (lora_rank > 0) {
    c.adapters.lora.rank = lora_rank;
    c.adapters.lora.alpha = 16.0f;
    c.adapters.lora.targets = parse_gpt_lora_targets("qkv,proj,fc,fc_proj");
  }
  return c;
}

struct Trained {
  uint64_t hash = 0, frozen = 0;
  double first = 0.0, last = 0.0;
};

// `steps` steps of one micro-batch (with several, stages 2-3 reduce per micro-batch: another
// summation order) from the engine's seed.
Trained train(const GptConfig& c, const EngineConfig& ec, int steps) {
  GptModel m(c);
  Engine e(m, world(), ec);
  const auto tokens = rank_tokens(c, 1, 7);
  m.set_tokens(tokens);
  Trained r;
  for (int s = 0; s < steps; ++s) {
    const double loss = e.step().loss;
    (s == 0 ? r.first : r.last) = loss;
  }
  r.hash = e.param_hash();
  if (e.num_frozen_params() > 0) r.frozen = e.frozen_hash();
  return r;
}

// Stages 1-3 (and stage 3 with checkpointing) give stage 0's bits.
void expect_stages_agree(const GptConfig& c, const EngineConfig& base, int steps) {
  std::vector<Trained> runs;
  for (int stage = 0; stage <= 3; ++stage) {
    EngineConfig ec = base;
    ec.stage = zero_stage_from_int(stage);
    runs.push_back(train(c, ec, steps));
  }
  GptConfig ck = c;
  ck.run.checkpoint_activations = true;
  runs.push_back(train(ck, base, steps));
  for (size_t i = 1; i < runs.size(); ++i) {
    const std::string what = i < 4 ? "stage " + std::to_string(i) : "stage 3 checkpointed";
    EXPECT_EQ(runs[i].hash, runs[0].hash) << what;
    EXPECT_EQ(runs[i].last, runs[0].last) << what;
    EXPECT_EQ(runs[i].frozen, runs[0].frozen) << what;
  }
  if (world().rank() == 0)
    std::printf("  loss %.4f -> %.4f in %d steps, param_hash %s at %d ranks\n", runs[0].first,
                runs[0].last, steps, param_hash_hex(runs[0].hash).c_str(), world().size());
  EXPECT_TRUE(std::isfinite(runs[0].first));
  EXPECT_LT(runs[0].last, runs[0].first);
}

TEST(GptLlamaEngine, StagesAgreeBitwise) {
  for (const testing::ArchCase& a : archs())
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(a.name + " " + std::string(dtype_name(dt)));
      if (world().rank() == 0) std::printf("%s %s:\n", a.name.c_str(), dtype_name(dt).data());
      expect_stages_agree(llama_config(a, dt), engine_config(3, dt), 4);
    }
}

// LoRA on every fused linear (qkv, proj, fc, fc_proj) of a frozen bf16 Llama base: stages agree
// at 4 ranks too (gpt_lora_engine_test: the base's loss at B = 0, frozen_hash, at 1 and 2 ranks).
TEST(GptLlamaEngine, LoraStagesAgreeBitwise) {
  for (const testing::ArchCase& a : archs()) {
    SCOPED_TRACE(a.name);
    if (world().rank() == 0) std::printf("%s LoRA r=4 on qkv,proj,fc,fc_proj:\n", a.name.c_str());
    expect_stages_agree(llama_config(a, DType::kBF16, 4), engine_config(3, DType::kBF16), 3);
  }
}

// The frozen base stored as int8 (one fp32 scale per row), computed by the int8 GEMM where this
// CPU has it ([Note: int8 compute]): the stages agree, the adapters train, and the loss is within
// 0.1% of the dequantized base's (the same bits without the int8 GEMM).
TEST(GptLlamaEngine, Int8FrozenBase) {
  for (const testing::ArchCase& a : archs())
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(a.name + " " + std::string(dtype_name(dt)));
      GptConfig c = llama_config(a, dt, 4);
      c.adapters.int8.accept = true;
      EngineConfig ec = engine_config(3, dt);
      ec.frozen.storage = DType::kI8;
      ec.frozen.int8_compute = FrozenPolicy::Int8Compute::kAuto;
      if (world().rank() == 0)
        std::printf("%s %s, int8 base (%s):\n", a.name.c_str(), dtype_name(dt).data(),
                    ec.frozen.hands_int8() ? "int8 GEMM" : "dequantized");
      expect_stages_agree(c, ec, 3);
      EngineConfig deq = ec;
      deq.frozen.int8_compute = FrozenPolicy::Int8Compute::kDequantize;
      GptConfig cd = c;
      cd.adapters.int8.accept = false;
      const Trained i8 = train(c, ec, 1), dq = train(cd, deq, 1);
      EXPECT_EQ(i8.frozen, dq.frozen);  // the same int8 records
      if (ec.frozen.hands_int8() && int8_gemm_available())
        EXPECT_NEAR(i8.first, dq.first, 1e-3 * dq.first);
      else
        EXPECT_EQ(i8.first, dq.first);
    }
}

}  // namespace
}  // namespace zs::nn
