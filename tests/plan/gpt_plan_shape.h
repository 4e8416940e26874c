// The planner's description of a zeroshard GPT config (tests only: runtime/ does not know nn/).
#pragma once

#include "nn/gpt.h"
#include "runtime/memory_plan.h"

namespace zs::test {

inline TransformerShape gpt_plan_shape(const nn::GptConfig& g) {
  TransformerShape s;
  s.family = TransformerFamily::kGpt;
  s.layers = g.layers;
  s.width = g.width;
  s.heads = g.heads;
  s.ffn = g.ffn_mult * g.width;
  s.vocab = g.vocab;
  s.context = g.context;
  return s;
}

}  // namespace zs::test
