// oneDNN's own scratchpads of the products GptModel builds for a configuration (any architecture,
// adapters, int8 base), measured by building the layers: what the tests that compare the
// activation plan with the tracker (tests/nn and tests/planner) hold the plan's
// gemm_scratchpads ([Note: GEMM scratchpads] in nn/gemm.h) to.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/lm_head.h"
#include "nn/lora.h"
#include "nn/threads.h"

namespace zs::nn::testing {

// Builds the same layers models/gpt/gpt.cc builds (any architecture: the qkv rows, fc rows, biases,
// head_dim (proj and attention over D = heads head_dim) and key/value heads of g.arch; the LoRA
// adapters; with g.adapters.int8.accept the four Int8Linears over their own workspace) over one
// workspace, with the thread team GptModel uses; checks that the workspaces are the planned ones
// and returns the activation bytes beyond them.
inline int64_t measured_gemm_scratchpads(const GptConfig& g) {
  ThreadScope scope(g.run.threads);  // as GptModel builds them: the scratchpads depend on the team
  MemoryTracker t;
  const DType mm = g.run.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const GptArchitecture& ar = g.arch;
  const int64_t M = static_cast<int64_t>(g.run.batch) * ar.context;
  const int C = ar.width, F = ar.ffn_width(), D = static_cast<int>(ar.attn_width());
  const int Q = static_cast<int>(ar.qkv_rows()), G = static_cast<int>(ar.fc_rows());
  GemmWorkspace ws(&t);
  Linear a(M, C, Q, ar.qkv_bias, false, mm, &t, &ws), b(M, D, C, ar.proj_bias, true, mm, &t, &ws),
      c(M, C, G, ar.mlp_bias, false, mm, &t, &ws), d(M, F, C, ar.mlp_bias, true, mm, &t, &ws);
  // The LM head over its chunk's rows (and the last chunk's), nn/lm_head.h.
  LmHead e(M, C, ar.vocab, gpt_head_chunk_rows(M, ar.vocab, g.run.head_chunk), mm, &t, &ws);
  Attention at(g.run.batch, ar.context, D, ar.heads, ar.kv_heads_or_heads(), mm, &t, &ws);
  std::vector<LoraAdapter> adapters;
  for (int k = 0; k < kNumGptLoraTargets; ++k) {
    const auto target = static_cast<GptLoraTarget>(k);
    if (!g.adapters.lora.targets_linear(target)) continue;
    int64_t in = 0, out = 0, base_in = 0, base_out = 0;
    gpt_lora_linear_shape(target, ar, &in, &out);
    gpt_lora_linear_shape(gpt_lora_base_linear(target), ar, &base_in, &base_out);
    adapters.emplace_back(M, in, out, g.adapters.lora.rank, g.adapters.lora.scaling(), mm, &t, &ws,
                          base_out);
  }
  // [Note: int8 base compute] the four Int8Linears over their own workspace.
  GemmWorkspace int8_ws(&t);
  std::vector<Int8Linear> int8;
  const GptActivationDims dims = GptActivationDims::of(g);
  for (int k = 0; k < kNumGptLinears && g.adapters.int8.accept; ++k)
    int8.emplace_back(gpt_int8_linear_desc(dims, static_cast<GptLoraTarget>(k)), &t, &ws, &int8_ws);
  EXPECT_EQ(static_cast<int64_t>(ws.size()),
            gpt_cpu_gemm_workspace_bytes(dims, this_process_cpu_gemm()));
  EXPECT_EQ(static_cast<int64_t>(int8_ws.size()), gpt_buffer_table(dims, DeviceKind::kCpu).int8_ws);
  if (!gemm_uses_onednn() && !g.adapters.int8.accept) {
    EXPECT_EQ(t.current(MemCategory::kActivations), static_cast<int64_t>(ws.size()));
  }
  return t.current(MemCategory::kActivations) - static_cast<int64_t>(ws.size()) -
         static_cast<int64_t>(int8_ws.size());
}

}  // namespace zs::nn::testing
