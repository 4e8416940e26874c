// Internal to nn/: the buffers and shared layers of a GptModel, used by its units.
//
// [Note: block activations] Without checkpointing each block keeps its own BlockActs; with
// checkpointing one BlockActs is shared by all blocks and only the block inputs xs[l] are kept:
// a block's backward first recomputes its forward into the shared set. The kernels are
// deterministic for a fixed thread count, so the recomputed values, and hence the gradients, are
// bitwise those of the non-checkpointed model.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_buffers.h"
#include "models/gpt/gpt_common.h"
#include "nn/attention.h"
#include "nn/flash_attention.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/lm_head.h"
#include "nn/lora.h"

namespace zs::nn {

struct BlockActs : GptBlockBuffers {
  AttentionActs attn() {
    return {q.data(), k.data(), v.data(), p.as<float>(), pm.empty() ? p.data() : pm.data()};
  }
  FlashAttentionActs flash() {
    return {q.data(), k.data(), v.data(), kt.data(), vt.data(), lse.as<float>()};
  }
};

// The buffers (inputs, xs, the head, the temporaries shared by all units) are GptModelBuffers',
// allocated from gpt_buffer_table() (models/gpt/gpt_buffers.h), the table the CUDA model and the
// activation plan read too.
struct GptModel::State : GptDims, GptModelBuffers {
  GptConfig cfg;
  MemoryTracker* tracker = nullptr;
  DType mm = DType::kF32;
  int threads = 1;
  int64_t act_bytes = 0;

  bool inference = false;
  int inference_length = 0;
  std::vector<BlockActs> acts;  // L, or 1 when checkpointing
  double loss = std::numeric_limits<double>::quiet_NaN();

  // Widened GEMM operands (nn/gemm.h [Note: GEMM paths]); counted in act_bytes. Declared before
  // the layers that reserve in it.
  std::unique_ptr<GemmWorkspace> gemm_ws;

  // Shared layers (one per shape).
  Linear qkv_lin, proj_lin, fc_lin, fcproj_lin;
  LmHead head;     // the LM head and its loss, in row chunks ([Note: chunked head] in nn/lm_head.h)
  Attention attn;  // GptAttention::kGemm (empty otherwise)
  FlashAttention flash;  // GptAttention::kFused (empty otherwise)

  // LoRA ([Note: LoRA] in models/gpt/gpt_adapters.h), by GptLoraTarget: the adapter of each adapted
  // linear or part of one, the index of its lora_A in the block's parameters (-1: not adapted) and
  // its slot in BlockActs::lora_u.
  int64_t lora_rank = 0;
  std::array<LoraAdapter, kNumGptLoraTargets> lora;
  std::array<int, kNumGptLoraTargets> lora_index = minus_ones();
  std::array<int, kNumGptLoraTargets> lora_slot = minus_ones();
  // The column of its base linear's output each adapter starts at (gpt_lora_row_offset()).
  std::array<int64_t, kNumGptLoraTargets> lora_offset{};

  // [Note: int8 base compute] (cfg.adapters.int8.accept): the base linears on int8 weights, by
  // GptLoraTarget, sharing int8_ws (declared before them).
  std::unique_ptr<GemmWorkspace> int8_ws;
  std::array<Int8Linear, kNumGptLinears> int8_lin;

  State(const GptConfig& c, MemoryTracker* t);
  static std::array<int, kNumGptLoraTargets> minus_ones() {
    std::array<int, kNumGptLoraTargets> a;
    a.fill(-1);
    return a;
  }
  Buffer act(int64_t bytes);  // a kActivations buffer, counted in act_bytes
  BlockActs& block_acts(int l) { return acts[cfg.run.checkpoint_activations ? 0 : l]; }
  float* x(int l) { return xs.as<float>() + static_cast<int64_t>(l) * M * C; }
  AttentionWork attn_work();
  // The parameter as fp32: its data when fp32, else converted into scratch slot `slot`.
  const float* small_f32(const ParamView& p, int slot);
  // The same for an optional parameter (an absent bias): null stays null.
  const float* small_f32(const ParamView* p, int slot);
  // A matmul weight in mm: its data when its dtype is mm, else converted to fp32 scratch.
  const void* weight_mm(const ParamView& p);
  // src in mm: src itself when mm is fp32, else converted into dst (n elements).
  const void* to_mm(const float* src, Buffer& dst, int64_t n);
  // An adapter's A and B in mm: the views' data, or (fp16 compute) fp32 copies in lora_wscratch.
  std::array<const void*, 2> lora_weights_mm(const ParamView& a, const ParamView& b);
  // Target t's u = x A^T [M, r] in mm within the block set `acts`.
  void* lora_u(BlockActs& acts, int t);
};

}  // namespace zs::nn
