// The GPT's buffer table: every buffer the CPU model (models/gpt/gpt_state.h) and the CUDA model
// (models/gpt/cuda/gpt_cuda_state.h) allocate in their constructors, by name, member, bytes and the
// part of the ActivationPlan it counts in. gpt_buffer_table() (models/gpt/gpt_activations.h) fills
// it for a device; both models build their state from it (allocate_gpt_buffers) and
// gpt_activation_plan() sums it, so the models and their plan cannot drift apart.
//
// M = batch * context rows, C the width, D = heads head_dim the attention's width (C unless
// head_dim is set), F the FFN width, mm the matmul dtype (the CPU's or the
// GPU's, [Note: GPT activations] in models/gpt/gpt_activations.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"

namespace zs::nn {

// The buffers one block keeps between its forward and its backward: one set per block, or one
// shared set under checkpointing ([Note: block activations] in models/gpt/gpt_state.h).
struct GptBlockBuffers {
  Buffer h1;            // [M, C] ln1 output, mm
  Buffer mean1, rstd1;  // [M] fp32 (no mean with RMSNorm)
  Buffer q, k, v;       // [B, H, T, hd] mm (fused attention: k and v [B, KV, T, hd])
  Buffer qk_x;          // [M, (H + KV) hd] fp32: q and k heads before their norms (qk_norm only)
  Buffer qk_rstd;       // [M, H + KV] fp32: their statistics (qk_norm only)
  Buffer p;             // [B, H, T, T] fp32 probabilities (empty with fused attention)
  Buffer pm;            // [B, H, T, T] mm (empty when mm is fp32 or with fused attention)
  Buffer lse;           // [B, H, T] fp32 log-sum-exp of each query row (fused attention only)
  Buffer kt, vt;        // [B, KV, hd, Tp] mm: k and v transposed (Tp: padded_context(T))
                        // (fused attention only, nn::FlashAttentionActs)
  Buffer a;             // [M, D] attention output, mm (D = H hd: C unless head_dim is set)
  Buffer x2;            // [M, C] residual after attention, fp32
  Buffer h2;            // [M, C] ln2 output, mm
  Buffer mean2, rstd2;  // [M] fp32
  Buffer f;       // [M, F] fp32: the GELU's saved derivative (CPU) or its input (CUDA); with SwiGLU
                  // [M, 2F] fp32: gate and up, fc's output
  Buffer g;       // [M, F] GELU output, mm
  Buffer lora_u;  // [adapted linears][M, r] mm: x A^T of each LoRA adapter (CPU only)
};

// The buffers a model holds once (not per block). A device leaves the rows it does not use empty
// (its table gives them 0 bytes): the CPU has no ids, staging or bias scratch, the GPU no
// inputs/targets pair, last logits, SwiGLU, fp16 weight scratch or LoRA temporaries.
struct GptModelBuffers {
  // Inputs.
  Buffer inputs, targets;     // CPU: [M] int32 each
  Buffer ids;                 // CUDA: [5 M + 1] int32 ([Note: token upload])
  Buffer staging0, staging1;  // CUDA, pinned: the two staging slots of `ids`
  Buffer row_loss_host;       // CUDA, pinned: [M] fp32
  Buffer logits_host;         // CUDA, pinned: [V] fp32
  // Kept activations.
  Buffer xs;                // [L + 1][M, C] block inputs, fp32; xs[L] is the head's input
  Buffer hf, meanf, rstdf;  // head: ln_f output [M, C] mm, [M], [M]
  Buffer logits;            // [R, V] fp32, R = GptBufferTable::head_rows ([Note: chunked head]
                            // in nn/lm_head.h); probabilities after a training forward
  Buffer row_loss;          // [M] fp32
  Buffer last_logits;       // CPU: [V] fp32
  // Temporaries shared by all units.
  Buffer qkv;                     // [M, Q] fp32
  Buffer att_s, att_o;            // [B, H, T, T], [M, D] fp32
  Buffer att_dom, att_dsm;        // [M, D], [B, H, T, T] mm (att_dsm empty when mm is fp32)
  Buffer att_dq, att_dk, att_dv;  // [M, D] fp32 each
                                  // (att_s .. att_dv: empty with fused attention)
  Buffer att_tiles;               // CPU, fused attention: [threads][tile set] fp32
                                  // (nn::FlashAttention::tiles_bytes)
  Buffer dres;                    // [M, C] gradient of the residual stream
  Buffer dwide;                   // [M, wide] fp32 gradient temporaries
  Buffer dwide_mm;                // [M, wide] mm copy (empty when mm is fp32); CPU: also [R, V]
  Buffer dnarrow;                 // [M, max(C, D)] fp32 (CUDA: also the forward's pre-residual
                                  // output)
  Buffer dnarrow_mm;              // [M, C] mm copy of dres / dnarrow (empty when mm is fp32)
  Buffer dmlp;                    // CPU: [M, F] fp32 gradient of SwiGLU's output (SwiGLU only)
  Buffer wscratch;                // CPU: [max weight numel] fp32 (fp16 compute)
  Buffer pscratch;                // [4][slot] fp32 small parameters converted
  Buffer lora_t, lora_t_mm;       // CPU: [M, r] fp32 and mm (lowp): x A^T or dy B (LoRA only)
  Buffer lora_wscratch;           // CPU, fp16 compute: one adapter's A and B in fp32 (LoRA only)
  Buffer bias_scratch;            // CUDA: column sums of bias_backward and layernorm_backward
};

// Where gpt_activation_plan() counts a buffer (unit/activation_plan.h).
enum class GptBufferPart : uint8_t {
  kInputs,       // ActivationPlan::inputs
  kPinnedHost,   // ActivationPlan::pinned_host (page-locked host memory, kOther)
  kBlockInputs,  // xs: L slices count with the blocks, the last with the head
  kHead,         // ActivationPlan::head
  kWorkspace,    // ActivationPlan::workspace
};

// One row of the table: `bytes` of buffer `member` of a `Buffers` struct; 0 bytes: not allocated.
template <typename Buffers>
struct GptBufferRow {
  const char* name = "";
  Buffer Buffers::*member = nullptr;
  int64_t bytes = 0;
  GptBufferPart part = GptBufferPart::kWorkspace;
};

struct GptBufferTable {
  DType mm = DType::kF32;   // the matmul dtype
  int64_t block_sets = 0;   // L, or 1 when checkpointing
  int64_t block_input = 0;  // bytes of one xs slice [M, C] fp32
  int64_t head_rows = 0;    // R: rows of one LM head chunk (M: unchunked; CUDA: always M)
  // In allocation order: inputs and pinned staging, xs, then (after the block sets) the head and
  // the temporaries.
  std::vector<GptBufferRow<GptModelBuffers>> model;
  std::vector<GptBufferRow<GptBlockBuffers>> block;  // one block set
  // Not Buffers of the table, allocated by the layers that use them and counted by the plan:
  int64_t int8_ws = 0;           // CPU: the Int8Linears' shared workspace (int8_accept only)
  int64_t cublas_workspace = 0;  // CUDA: CublasContext's workspace (gemm_workspace)
  int64_t pscratch_stride = 0;   // floats between two pscratch slots

  int64_t block_bytes() const;              // one block set
  int64_t bytes(GptBufferPart part) const;  // the model rows of `part`
  int64_t row(const char* name) const;      // the bytes of a model or block row (0: none)
};

// Allocates every row with bytes > 0 of `table` into `model` and `block_sets` (resized to
// table.block_sets) through `alloc(bytes, part)`, which returns a registered Buffer (the part says
// where: kPinnedHost rows are page-locked host memory). The order is the table's, the block sets
// after the block inputs.
template <typename BlockSet, typename Alloc>
void allocate_gpt_buffers(const GptBufferTable& table, GptModelBuffers& model,
                          std::vector<BlockSet>& block_sets, Alloc&& alloc) {
  bool blocks_done = false;
  auto allocate_blocks = [&] {
    block_sets.resize(static_cast<size_t>(table.block_sets));
    for (GptBlockBuffers& set : block_sets)
      for (const GptBufferRow<GptBlockBuffers>& r : table.block)
        if (r.bytes > 0) set.*r.member = alloc(r.bytes, r.part);
    blocks_done = true;
  };
  for (const GptBufferRow<GptModelBuffers>& r : table.model) {
    const bool before_blocks = r.part == GptBufferPart::kInputs ||
                               r.part == GptBufferPart::kPinnedHost ||
                               r.part == GptBufferPart::kBlockInputs;
    if (!before_blocks && !blocks_done) allocate_blocks();
    if (r.bytes > 0) model.*r.member = alloc(r.bytes, r.part);
  }
  if (!blocks_done) allocate_blocks();
}

}  // namespace zs::nn
