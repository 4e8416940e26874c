// What the GPT engine tests (gpt_lora_engine_test, gpt_llama_engine_test) share: the engine's
// settings and each rank's tokens.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "runtime/engine.h"
#include "tests/runtime/test_world.h"

namespace zs::nn::testing {

// `stage`, parameters in `dt`, fp32 gradients, AdamW at lr 1e-2 without weight decay,
// `micro_batches` per step.
inline EngineConfig engine_config(int stage, DType dt, int micro_batches = 1) {
  EngineConfig e;
  e.stage = zero_stage_from_int(stage);
  e.precision.param_dtype = dt;
  e.precision.grad_dtype = DType::kF32;
  e.optimizer.schedule.lr = 1e-2f;
  e.optimizer.adamw.weight_decay = 0.0f;
  e.micro_batches = micro_batches;
  return e;
}

// This rank's tokens for `micro_batches` micro-batches (one set_tokens() call), seeded by `seed`
// and the rank.
inline std::vector<int32_t> rank_tokens(const GptConfig& c, int micro_batches, uint32_t seed) {
  std::mt19937 rng(seed * 1000 + static_cast<uint32_t>(zs::testing::world().rank()));
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

}  // namespace zs::nn::testing
