// The activation buffers one GPT block keeps between its forward and its backward, shared by the
// CPU model (nn/gpt_state.h) and the CUDA model (nn/cuda/gpt_cuda_state.h): one description of the
// per-block layout that runtime/memory_plan.cc mirrors. M = batch * context rows, C the width, F
// the FFN width, mm the compute dtype of the matmul operands.
#pragma once

#include <cstdint>

#include "core/buffer.h"

namespace zs::nn {

struct GptBlockBuffers {
  Buffer h1;            // [M, C] ln1 output, mm
  Buffer mean1, rstd1;  // [M] fp32
  Buffer q, k, v;       // [B, H, T, hd] mm
  Buffer p;             // [B, H, T, T] fp32 probabilities
  Buffer pm;            // [B, H, T, T] mm (empty when mm is fp32)
  Buffer a;             // [M, C] attention output, mm
  Buffer x2;            // [M, C] residual after attention, fp32
  Buffer h2;            // [M, C] ln2 output, mm
  Buffer mean2, rstd2;  // [M] fp32
  Buffer f;             // [M, F] fp32: the GELU's saved derivative (CPU) or its input (CUDA)
  Buffer g;             // [M, F] GELU output, mm

  // Allocates every buffer through `act(bytes)`, which returns a registered Buffer. bhtt =
  // B * H * T * T; e = the size of mm; `lowp`: mm is 16-bit (then pm exists).
  template <typename Act>
  void allocate(int64_t M, int64_t C, int64_t F, int64_t bhtt, int64_t e, bool lowp, Act&& act) {
    constexpr int64_t f4 = 4;
    h1 = act(M * C * e);
    mean1 = act(M * f4);
    rstd1 = act(M * f4);
    q = act(M * C * e);
    k = act(M * C * e);
    v = act(M * C * e);
    p = act(bhtt * f4);
    if (lowp) pm = act(bhtt * e);
    a = act(M * C * e);
    x2 = act(M * C * f4);
    h2 = act(M * C * e);
    mean2 = act(M * f4);
    rstd2 = act(M * f4);
    f = act(M * F * f4);
    g = act(M * F * e);
  }
};

}  // namespace zs::nn
