// The activation buffers one GPT block keeps between its forward and its backward, shared by the
// CPU model (models/gpt/gpt_state.h) and the CUDA model (models/gpt/cuda/gpt_cuda_state.h): one
// description of the per-block layout, sized by gpt_block_bytes() (models/gpt/gpt_activations.h),
// which the activation plan reads too. M = batch * context rows, C the width, F the FFN width, mm
// the compute dtype of the matmul operands.
#pragma once

#include <cstdint>

#include "core/buffer.h"
#include "models/gpt/gpt_activations.h"

namespace zs::nn {

struct GptBlockBuffers {
  Buffer h1;            // [M, C] ln1 output, mm
  Buffer mean1, rstd1;  // [M] fp32 (no mean with RMSNorm)
  Buffer q, k, v;       // [B, H, T, hd] mm
  Buffer p;             // [B, H, T, T] fp32 probabilities
  Buffer pm;            // [B, H, T, T] mm (empty when mm is fp32)
  Buffer a;             // [M, C] attention output, mm
  Buffer x2;            // [M, C] residual after attention, fp32
  Buffer h2;            // [M, C] ln2 output, mm
  Buffer mean2, rstd2;  // [M] fp32
  Buffer f;       // [M, F] fp32: the GELU's saved derivative (CPU) or its input (CUDA); with SwiGLU
                  // [M, 2F] fp32: gate and up, fc's output
  Buffer g;       // [M, F] GELU output, mm
  Buffer lora_u;  // [adapted linears][M, r] mm: x A^T of each LoRA adapter (CPU only)

  // Allocates every buffer of `bytes` (gpt_block_bytes()) through `act(bytes)`, which returns a
  // registered Buffer; pm only when mm is 16-bit (bytes.pm > 0), lora_u only with adapters.
  template <typename Act>
  void allocate(const GptBlockBytes& bytes, Act&& act) {
    h1 = act(bytes.h1);
    if (bytes.mean1 > 0) mean1 = act(bytes.mean1);
    rstd1 = act(bytes.rstd1);
    q = act(bytes.q);
    k = act(bytes.k);
    v = act(bytes.v);
    p = act(bytes.p);
    if (bytes.pm > 0) pm = act(bytes.pm);
    a = act(bytes.a);
    x2 = act(bytes.x2);
    h2 = act(bytes.h2);
    if (bytes.mean2 > 0) mean2 = act(bytes.mean2);
    rstd2 = act(bytes.rstd2);
    f = act(bytes.f);
    g = act(bytes.g);
    if (bytes.lora_u > 0) lora_u = act(bytes.lora_u);
  }
};

}  // namespace zs::nn
