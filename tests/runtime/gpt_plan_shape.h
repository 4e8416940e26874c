// The planner's description of a zeroshard GPT config (tests only: runtime/ does not know nn/).
#pragma once

#include "nn/gemm.h"
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

// How this process runs the CPU GPT's products (nn/gemm.h), in the planner's terms.
inline CpuGemm this_cpu_gemm() {
  if (!nn::gemm_uses_onednn()) return CpuGemm::kEigen;
  return nn::gemm_path(DType::kBF16).widened ? CpuGemm::kOnednnWidened : CpuGemm::kOnednn;
}

}  // namespace zs::test
