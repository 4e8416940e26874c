// Causal self-attention as one fused kernel on the CPU (flash-attention style): the function of
// nn::Attention (nn/attention.h) on the same qkv and output layouts, computed tile by tile (64
// query rows by 64 keys) with an online softmax, so no [B, H, T, T] score or probability matrix
// exists beyond one tile per thread. Forward keeps each query row's log-sum-exp; backward
// recomputes the tile's probabilities from it. Grouped-query heads read their key/value head in
// place: query head h uses key/value head h / (H / KV).
//
// [Note: fused attention order] Every output element is computed by one thread in an order fixed
// in the source: forward over (sequence, head, query block) items, backward over (sequence,
// key/value head) items, each owning its dQ rows and its group's dK, dV rows (summed over the
// group's heads in head order, then query blocks, then rows). The products are loops of multiply
// then add (no FMA: -ffp-contract=off) that vectorize only across independent outputs, exp is
// simd::exp_approx and row sums are simd.h's, so the bits are the same at every thread count and
// every ISA cap (ZS_MAX_ISA). fp32 arithmetic; with a bf16 mm the saved q, k, v and the output are
// bf16 and widened per tile. Not bitwise nn::Attention (another summation order): within fp32
// rounding of it (flash_attention_test).
//
// Thread-safety: const after construction; concurrent calls need their own tiles and buffers.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::nn {

// Kept from forward for backward (one set per block, or one shared set when checkpointing).
// Tp = FlashAttention::padded_context(T).
struct FlashAttentionActs {
  void* q = nullptr;     // [B, H, T, hd] in mm
  void* k = nullptr;     // [B, KV, T, hd] in mm
  void* v = nullptr;     // [B, KV, T, hd] in mm
  void* kt = nullptr;    // [B, KV, hd, Tp] in mm: K transposed (columns from T on zero)
  void* vt = nullptr;    // [B, KV, hd, Tp] in mm: V transposed
  float* lse = nullptr;  // [B, H, T] fp32: log-sum-exp of each query row's scaled scores
};

class FlashAttention {
 public:
  static constexpr int kTile = 64;  // query rows and keys of one tile

  FlashAttention() = default;
  // D = H hd the query (and output) width, KV key/value heads (H % KV == 0), mm fp32 or bf16,
  // `threads` the team the calls run with (the tiles buffer holds one tile set per thread).
  // Throws zs::Error(kInvalidArgument) on a bad shape.
  FlashAttention(int B, int T, int D, int H, int KV, DType mm, int threads);

  // qkv [B*T, D + 2 KV hd] fp32 (q | k | v, as nn::Attention) -> out [B*T, D] in mm; fills acts.
  // `tiles`: tiles_bytes(hd, threads) bytes, 64-byte aligned, contents not kept between calls.
  void forward(const float* qkv, const FlashAttentionActs& acts, float* tiles, void* out) const;
  // dout [B*T, D] fp32, `out` the forward's output -> dqkv [B*T, D + 2 KV hd] fp32 (overwrites).
  void backward(const float* dout, const FlashAttentionActs& acts, const void* out, float* tiles,
                float* dqkv) const;

  // The tiles buffer: one set of per-thread tiles per thread, for head dimension hd.
  static int64_t tiles_bytes(int hd, int threads);
  // T rounded up to kTile, plus 16: the row length of FlashAttentionActs::kt and vt.
  static int padded_context(int T);
  int threads() const { return threads_; }

 private:
  int B_ = 0, T_ = 0, D_ = 0, H_ = 0, KV_ = 0, hd_ = 0, threads_ = 1;
  DType mm_ = DType::kF32;
};

}  // namespace zs::nn
