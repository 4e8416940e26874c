// Fully connected layer y[M, out] = x[M, in] W^T + b with W [out, in] row-major (PyTorch's
// layout). Stateless apart from its GEMM primitives, so one Linear serves every block of the
// same shape: the caller passes the saved input and the weights on each call.
//
// Operands of the products are in the matmul dtype `mm` (fp32, or bf16 when the compute dtype is
// bf16); outputs and gradients are fp32.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "nn/gemm.h"

namespace zs::nn {

class Linear {
 public:
  Linear() = default;
  // `residual`: forward adds into y (y += x W^T + b), the fused residual connection.
  // `ws`: the model's shared GEMM workspace (nn/gemm.h), or null for one of its own.
  Linear(int64_t M, int in, int out, bool bias, bool residual, DType mm, MemoryTracker* tracker,
         GemmWorkspace* ws = nullptr);

  // y = x W^T + b (or y += ... when residual). x [M, in] and w [out, in] in mm; b fp32 or null.
  void forward(const void* x, const void* w, const float* b, float* y);
  // dx[M, in] = dy W (overwrites). dy [M, out] in mm.
  void backward_data(const void* dy, const void* w, float* dx);
  // dw[out, in] += dy^T x (accumulates). dy [M, out] and x [M, in] in mm.
  void backward_weight(const void* dy, const void* x, float* dw);
  // backward_data then backward_weight, the same bits; on a widening GEMM path (nn/gemm.h) dy is
  // widened once for both products. dw null: backward_data alone (a frozen weight).
  void backward(const void* dy, const void* x, const void* w, float* dx, float* dw);

  int64_t rows() const { return M_; }
  // oneDNN's scratchpads of its products ([Note: GEMM scratchpads] in nn/gemm.h).
  int64_t scratchpad_bytes() const;
  int in() const { return in_; }
  int out() const { return out_; }
  // The workspace bytes backward() needs on a widening path: dy, then max(w, x) (64-byte
  // aligned fp32 spans).
  static size_t backward_workspace_need(int64_t M, int in, int out);
  // The products the constructor builds, forward, backward data, backward weight (planners size
  // their workspace and scratchpads from these).
  static std::array<GemmDesc, 3> gemm_descs(int64_t M, int in, int out, bool bias, bool residual,
                                            DType mm);

 private:
  int64_t M_ = 0;
  int in_ = 0, out_ = 0;
  Gemm fwd_, bwd_data_, bwd_weight_;
  GemmWorkspace* ws_ = nullptr;  // backward()'s widened dy, then w and x in turn
  std::unique_ptr<GemmWorkspace> own_ws_;
};

}  // namespace zs::nn
