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
#include "models/gpt/gpt_block_buffers.h"
#include "models/gpt/gpt_common.h"
#include "nn/attention.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/lora.h"

namespace zs::nn {

struct BlockActs : GptBlockBuffers {
  AttentionActs attn() {
    return {q.data(), k.data(), v.data(), p.as<float>(), pm.empty() ? p.data() : pm.data()};
  }
};

struct GptModel::State : GptDims {
  GptConfig cfg;
  MemoryTracker* tracker = nullptr;
  DType mm = DType::kF32;
  int threads = 1;
  int64_t act_bytes = 0;

  // Inputs.
  Buffer inputs, targets;  // [M] int32
  bool inference = false;
  int inference_length = 0;

  // Kept activations.
  Buffer xs;                    // [L + 1][M, C] block inputs, fp32; xs[L] is the head's input
  std::vector<BlockActs> acts;  // L, or 1 when checkpointing
  Buffer hf, meanf, rstdf;      // head: ln_f output [M, C] mm, [M], [M]
  Buffer logits;                // [M, V] fp32; probabilities after a training forward
  Buffer row_loss;              // [M]
  Buffer last_logits;           // [V]
  double loss = std::numeric_limits<double>::quiet_NaN();

  // Temporaries shared by all units.
  Buffer qkv;                     // [M, Q] fp32
  Buffer att_s, att_o;            // [B, H, T, T], [M, C] fp32
  Buffer att_dom, att_dsm;        // [M, C], [B, H, T, T] mm
  Buffer att_dq, att_dk, att_dv;  // [M, C] fp32 each
  Buffer dres;                    // [M, C] gradient of the residual stream
  Buffer dwide;                   // [M, max(G, Q, V)] fp32 gradient temporaries
  Buffer dwide_mm;                // [M, max(G, Q, V)] mm copy (empty when mm is fp32)
  Buffer dnarrow;                 // [M, C] fp32
  Buffer dnarrow_mm;              // [M, C] mm copy of dres / dnarrow (empty when mm is fp32)
  Buffer dmlp;                    // [M, F] fp32 gradient of SwiGLU's output (SwiGLU only)
  Buffer wscratch;                // [max weight numel] fp32 (fp16 compute: weights converted)
  Buffer pscratch;                // [4][max(G, Q)] fp32 small parameters converted
  Buffer lora_t, lora_t_mm;       // [M, r] fp32 and mm (lowp): x A^T or dy B (LoRA only)
  Buffer lora_wscratch;           // fp16 compute: one adapter's A and B in fp32 (LoRA only)

  // Widened GEMM operands (nn/gemm.h [Note: GEMM paths]); counted in act_bytes. Declared before
  // the layers that reserve in it.
  std::unique_ptr<GemmWorkspace> gemm_ws;

  // Shared layers (one per shape).
  Linear qkv_lin, proj_lin, fc_lin, fcproj_lin, head_lin;
  Attention attn;

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
