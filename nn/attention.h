// Causal multi-head self-attention core (between the qkv projection and the output projection):
//   q, k, v = split(qkv) per head; S = Q K^T / sqrt(hd); P = causal_softmax(S); O = P V;
//   out = merge heads(O).
// Grouped-query attention (num_kv_heads KV < H): K/V head g serves query heads [g*H/KV,
// (g+1)*H/KV) (transformers' repeat_kv), so q, k, v are expanded to H heads and dK, dV summed over
// each group when merged back.
// Stateless apart from its batched GEMMs (shared by every block); the saved activations live in
// AttentionActs, the temporaries in AttentionWork, both owned by the caller.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "nn/gemm.h"

namespace zs::nn {

// Kept from forward for backward (one set per block, or one shared set when checkpointing).
struct AttentionActs {
  void* q = nullptr;   // [B, H, T, hd] in mm
  void* k = nullptr;   // [B, H, T, hd] in mm
  void* v = nullptr;   // [B, H, T, hd] in mm
  float* p = nullptr;  // [B, H, T, T] softmax probabilities, fp32
  void* pm = nullptr;  // [B, H, T, T] P in mm (== p when mm is fp32)
};

// Temporaries, shared by all blocks.
struct AttentionWork {
  float* s = nullptr;   // [B, H, T, T] scores in forward, dP / dS in backward
  float* o = nullptr;   // [B, H, T, hd] forward output before merging heads
  void* dom = nullptr;  // [B, H, T, hd] dO in mm
  void* dsm = nullptr;  // [B, H, T, T] dS in mm (unused when mm is fp32: dS stays in s)
  float* dq = nullptr;  // [B, H, T, hd]
  float* dk = nullptr;  // [B, H, T, hd]
  float* dv = nullptr;  // [B, H, T, hd]
};

class Attention {
 public:
  Attention() = default;
  // `ws`: the model's shared GEMM workspace (nn/gemm.h), or null for one of its own per GEMM.
  Attention(int B, int T, int C, int H, DType mm, MemoryTracker* tracker,
            GemmWorkspace* ws = nullptr);
  // Grouped-query: KV key/value heads (H % KV == 0); KV == H is the constructor above, to the bit.
  Attention(int B, int T, int C, int H, int KV, DType mm, MemoryTracker* tracker,
            GemmWorkspace* ws = nullptr);

  // qkv [B*T, C + 2 KV hd] fp32 (q | k | v, q head h at columns h*hd, k/v head g at g*hd of its
  // part; 3C when KV == H) -> out [B*T, C] in mm.
  void forward(const float* qkv, const AttentionActs& acts, const AttentionWork& work, void* out);
  // dout [B*T, C] fp32 -> dqkv [B*T, C + 2 KV hd] fp32 (overwrites; dK, dV summed over groups).
  void backward(const float* dout, const AttentionActs& acts, const AttentionWork& work,
                float* dqkv);
  // oneDNN's scratchpads of its products ([Note: GEMM scratchpads] in nn/gemm.h).
  int64_t scratchpad_bytes() const;

 private:
  // [Note: causal split] Each batched product is run as two GEMMs over the query rows [0, h) and
  // [h, T), h = T/2: the first half of the queries only sees the first half of the keys, which
  // saves a quarter of the attention FLOPs. h = 0 (short contexts) runs one full GEMM.
  struct Split {
    Gemm top, bottom;
  };
  void run(Split& g, const void* a, int64_t a_top, int64_t a_bot, const void* b, int64_t b_top,
           int64_t b_bot, float* c, int64_t c_top, int64_t c_bot);
  // Column of head h's q (s = 0), k (1) or v (2) in a qkv row; the width of that row.
  int64_t qkv_col(int s, int h) const;
  int64_t qkv_width() const { return C_ + 2 * static_cast<int64_t>(KV_) * hd_; }
  // dq, dk, dv [B, H, T, hd] -> dqkv rows (overwrites), dK and dV summed over each group.
  void merge_grads(const AttentionWork& w, float* dqkv) const;
  int B_ = 0, T_ = 0, C_ = 0, H_ = 0, KV_ = 0, hd_ = 0, h_ = 0;
  DType mm_ = DType::kF32;
  Split qk_, pv_, dp_, dv_, dq_, dk_;
  // Widening GEMM path (nn/gemm.h): both halves of a split read overlapping spans of the same
  // operands, widened once per pair into this workspace ([B, H, T, T] + [B, H, T, hd] fp32).
  GemmWorkspace* ws_ = nullptr;
  std::unique_ptr<GemmWorkspace> own_ws_;

 public:
  // The workspace bytes the pairs need on a widening path.
  static size_t pair_workspace_need(int B, int T, int C, int H);
  // One split's products ([Note: causal split]): top only when has_top (T >= 16).
  struct SplitDescs {
    bool has_top = false;
    GemmDesc top, bottom;
  };
  // The products the constructor builds, in the order qk, dp, pv, dq, dv, dk (planners size their
  // workspace and scratchpads from these; key/value heads do not change them).
  static std::array<SplitDescs, 6> gemm_descs(int B, int T, int C, int H, DType mm);
};

}  // namespace zs::nn
