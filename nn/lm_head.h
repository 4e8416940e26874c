// The LM head fused with its softmax cross-entropy: logits = x W^T over the M rows of x, run in
// chunks of token rows so that only one chunk's fp32 logits [rows, V] exist at a time.
//
// [Note: chunked head] Row chunks (Liger-kernel's fused linear cross-entropy), not vocabulary
// chunks: a row's softmax needs its whole row of logits, so each chunk computes its rows' logits,
// losses and dlogits exactly as the unchunked head computes them (the row kernels of
// nn/kernels.h). The loss, the row losses and dx = dlogits W (a sum over V per row) are then the
// same bits as the unchunked head's wherever the GEMM gives a row the same bits whatever rows
// surround it: oneDNN's AVX-512 kernels do (lm_head_test checks it); its AVX2 gemm:jit and Eigen
// do not, and there lm_head_test holds them to bounds derived from the logits' rounding. Vocabulary
// chunks would need an online log-sum-exp (another summation order for every loss) and would split
// dx's sum over V. What changes is dW = sum over rows of dlogits^T x: each chunk adds its partial
// sum into dW, chunks from last to first. Both orders are fp32 sums of the same M + 1 terms (dW's
// previous value and the M row products), so elementwise
//   |dW_chunked - dW_whole| <= 2 g(M + 1) (|dW0| + sum_i |dl_i| |x_i|),  g(n) = n u / (1 - n u),
// u = 2^-24 (the widened bf16 operands are exact in fp32); lm_head_test checks this bound. The
// chunk boundaries depend on M, V and the setting only (gpt_head_chunk_rows), never on ranks or
// threads, so a run's bits still do not depend on the ZeRO stage, the world size in world-invariant
// mode or checkpointing (which never recomputes the head). The forward keeps the losses only; the
// backward recomputes each chunk's logits except the last one's, whose probabilities the forward
// left in the buffer: one more head GEMM (2 M V C flops, less the last chunk's) per micro-batch.
// One chunk (rows = M) is the unchunked head op for op. docs/memory.md has the figures.
//
// Thread-safety: one call at a time (its GEMM primitives are not reentrant).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/linear.h"

namespace zs::nn {

class LmHead {
 public:
  LmHead() = default;
  // x [M, C] and W [V, C] in mm (fp32 or bf16); chunks of `chunk` rows (1..M; M: one chunk), the
  // last one holding M mod chunk rows when that is not 0. Products as nn::Linear's (`ws`: the
  // model's shared GEMM workspace, or null for one of their own). Throws zs::Error
  // (kInvalidArgument) for a chunk outside 1..M.
  LmHead(int64_t M, int C, int V, int64_t chunk, DType mm, MemoryTracker* tracker,
         GemmWorkspace* ws = nullptr);

  // Training or evaluation forward: row_loss[i] = logsumexp(logits_i) - logits_i[targets[i]] for
  // every row; returns their mean (double, row order). `logits` [chunk, V] fp32 is scratch; on
  // return it holds the last chunk's probabilities, which backward() uses.
  double forward(const void* x, const void* w, const int32_t* targets, float* logits,
                 float* row_loss);
  // Inference: the logits of row r (0..M-1) into out [V]; computes r's chunk only.
  void row_logits(const void* x, const void* w, int64_t r, float* logits, float* out);
  // After forward() on the same x, w and targets, with `logits` untouched since: dx [M, C] =
  // dlogits W (overwrites), dw [V, C] += dlogits^T x (null: a frozen weight), dlogits =
  // (softmax - onehot(target)) * scale / M. dl_mm [chunk, V] holds dlogits in mm (unused when mm
  // is fp32). row_loss is rewritten with the values forward() gave it.
  void backward(const void* x, const void* w, const int32_t* targets, float scale, float* logits,
                void* dl_mm, float* row_loss, float* dx, float* dw);

  int64_t rows() const { return M_; }
  int64_t chunk_rows() const { return chunk_; }
  int64_t num_chunks() const { return M_ == 0 ? 0 : (M_ + chunk_ - 1) / chunk_; }
  // oneDNN's scratchpads of its products ([Note: GEMM scratchpads] in nn/gemm.h).
  int64_t scratchpad_bytes() const;
  // The row counts of the Linears it builds for (M, chunk): {chunk}, or {chunk, M mod chunk}
  // (planners size their workspace and scratchpads from Linear::gemm_descs of each).
  static std::vector<int64_t> linear_rows(int64_t M, int64_t chunk);

 private:
  Linear& lin(int64_t rows) { return rows == chunk_ ? full_ : tail_; }
  // The logits of rows [r0, r0 + n) into `logits` through lin(n).
  void chunk_logits(const void* x, const void* w, int64_t r0, int64_t n, float* logits);

  int64_t M_ = 0, chunk_ = 0;
  int C_ = 0, V_ = 0;
  DType mm_ = DType::kF32;
  Linear full_, tail_;  // chunk rows; M mod chunk rows (when not 0)
};

}  // namespace zs::nn
