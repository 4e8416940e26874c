// oneDNN's own scratchpads (the library's choice, not planned) of the products GptModel builds for
// a configuration with adapters, for the tests that compare the activation plan with the tracker.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_tracker.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/gpt.h"
#include "nn/gpt_activations.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "nn/threads.h"

namespace zs::nn::testing {

// Builds the same layers over one workspace (which must be the planned GEMM workspace: checked)
// with the thread team GptModel uses, and returns the activation bytes beyond that workspace.
inline int64_t measured_gemm_scratchpads(const GptConfig& g) {
  ThreadScope scope(g.run.threads);  // as GptModel builds them: the scratchpads depend on the team
  MemoryTracker t;
  const DType mm = g.run.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const int64_t M = static_cast<int64_t>(g.run.batch) * g.arch.context;
  const int C = g.arch.width, F = g.arch.ffn_mult * g.arch.width;
  GemmWorkspace ws(&t);
  Linear a(M, C, 3 * C, true, false, mm, &t, &ws), b(M, C, C, true, true, mm, &t, &ws),
      c(M, C, F, true, false, mm, &t, &ws), d(M, F, C, true, true, mm, &t, &ws),
      e(M, C, g.arch.vocab, false, false, mm, &t, &ws);
  Attention at(g.run.batch, g.arch.context, C, g.arch.heads, mm, &t, &ws);
  std::vector<LoraAdapter> adapters;
  for (int k = 0; k < kNumGptLoraTargets; ++k) {
    if (!g.adapters.lora.targets_linear(static_cast<GptLoraTarget>(k))) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(static_cast<GptLoraTarget>(k), g.arch, &in, &out);
    adapters.emplace_back(M, in, out, g.adapters.lora.rank, g.adapters.lora.scaling(), mm, &t, &ws);
  }
  EXPECT_EQ(static_cast<int64_t>(ws.size()),
            gpt_cpu_gemm_workspace_bytes(GptActivationDims::of(g), this_process_cpu_gemm()));
  return t.current(MemCategory::kActivations) - static_cast<int64_t>(ws.size());
}

}  // namespace zs::nn::testing
