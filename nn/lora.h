// The low-rank update of one linear layer ([Note: LoRA] in models/gpt/gpt_adapters.h): with the
// base y = x W^T + b computed by nn::Linear, an adapter of rank r adds
//   forward   u  = x A^T          [M, r]    kept (in mm) for backward
//             y += s u B^T        [M, out]
//   backward  dB += s dy^T u      [out, r]
//             v  = dy B           [M, r]
//             dA += s v^T x       [r, in]
//             dx += s v A         [M, in]   on top of the base dx = dy W
// with s = alpha / r, A [r, in] and B [out, r] row-major (PyTorch's nn.Linear layout, as PEFT's
// lora_A.weight and lora_B.weight), x [M, in] and dy [M, out] in the matmul dtype mm; y, dx, dA
// and dB fp32. Every product is one nn::Gemm in mm with fp32 accumulation (s applied as the
// GEMM's alpha, after the product, as PEFT scales lora_B's output); u and v are rounded to mm
// before they feed a product, as autocast rounds lora_A's output.
//
// Stateless apart from its GEMM primitives: one adapter serves every block of the same shape, the
// caller passes the saved input, u and the weights on each call. run() allocates nothing.
// Thread-safety: one call at a time per object.
#pragma once

#include <array>
#include <cstdint>

#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "nn/gemm.h"

namespace zs::nn {

class LoraAdapter {
 public:
  LoraAdapter() = default;
  // `ws`: the model's shared GEMM workspace (nn/gemm.h); each product reserves its need there.
  // `ld_out`: the row stride of y and dy (0: out); an adapter of part of a fused linear (q_proj
  // of qkv) gets y and dy at its first column and the fused width as ld_out.
  LoraAdapter(int64_t M, int64_t in, int64_t out, int64_t rank, float scale, DType mm,
              MemoryTracker* tracker, GemmWorkspace* ws, int64_t ld_out = 0);

  // y += s (x A^T) B^T. u32: [M, r] fp32 scratch (unused when mm is fp32); u: [M, r] in mm,
  // receives x A^T, which backward() needs.
  void forward(const void* x, const void* a, const void* b, float* u32, void* u, float* y);
  // dB += s dy^T u, dA += s (dy B)^T x, dx += s (dy B) A. v32 [M, r] fp32 and v [M, r] mm scratch
  // (v unused when mm is fp32). da or db null: that gradient is skipped (a frozen adapter).
  void backward(const void* dy, const void* x, const void* u, const void* a, const void* b,
                float* v32, void* v, float* dx, float* da, float* db);

  // oneDNN's scratchpads of its products ([Note: GEMM scratchpads] in nn/gemm.h).
  int64_t scratchpad_bytes() const;

  // The six products in the order above, with alpha = scale where s applies; for planners
  // (gpt_cpu_gemm_workspace_bytes, models/gpt/gpt_activations.h) and the constructor alike.
  static std::array<GemmDesc, 6> gemm_descs(int64_t M, int64_t in, int64_t out, int64_t rank,
                                            int64_t ld_out = 0, DType mm = DType::kF32,
                                            float scale = 1.0f);

 private:
  int64_t M_ = 0, rank_ = 0;
  DType mm_ = DType::kF32;
  Gemm fwd_u_, fwd_y_, bwd_db_, bwd_v_, bwd_da_, bwd_dx_;
};

}  // namespace zs::nn
