// Matrix products for the CPU layers: C (= or +=) alpha * op(A) * op(B) (+ bias), fp32 or bf16
// inputs, fp32 accumulation and output. One Gemm object per shape, created once (oneDNN
// primitive + preallocated scratchpad when built with oneDNN, Eigen otherwise); run() allocates
// nothing.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/core/dtype.h"
#include "runtime/core/memory_tracker.h"

namespace zs::nn {

struct GemmDesc {
  int64_t batch = 1;  // independent products, each operand dense per batch entry
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;       // A stored [batch][k][m] (else [batch][m][k])
  bool trans_b = false;       // B stored [batch][n][k] (else [batch][k][n])
  DType dtype = DType::kF32;  // of A and B: fp32 or bf16. C is always fp32 [batch][m][n].
  float alpha = 1.0f;
  bool accumulate = false;  // C = C + (alpha * A B + bias) instead of C = alpha * A B + bias
  bool bias = false;        // + bias[n] (fp32), added after alpha
  // Row strides (elements between rows of the stored matrix) and batch strides; 0 = dense.
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;

  // The stored matrices' shapes and strides with the defaults filled in.
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  int64_t ld_a() const { return lda ? lda : a_cols(); }
  int64_t ld_b() const { return ldb ? ldb : b_cols(); }
  int64_t ld_c() const { return ldc ? ldc : n; }
  int64_t batch_stride_a() const { return stride_a ? stride_a : a_rows() * ld_a(); }
  int64_t batch_stride_b() const { return stride_b ? stride_b : b_rows() * ld_b(); }
  int64_t batch_stride_c() const { return stride_c ? stride_c : m * ld_c(); }
  // Elements spanned by each operand.
  int64_t a_extent() const {
    return (batch - 1) * batch_stride_a() + (a_rows() - 1) * ld_a() + a_cols();
  }
  int64_t b_extent() const {
    return (batch - 1) * batch_stride_b() + (b_rows() - 1) * ld_b() + b_cols();
  }
};

// True when this build calls oneDNN (bf16 inputs then run on the AVX-512 BF16 kernels).
bool gemm_uses_onednn();

// Thread-safety: run() may not be called concurrently on one object.
class Gemm {
 public:
  Gemm();
  // Throws zs::Error(kInvalidArgument) for a bad shape or dtype. Scratch bytes go to `tracker`
  // under kActivations.
  Gemm(const GemmDesc& desc, MemoryTracker* tracker);
  ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  void run(const void* a, const void* b, float* c, const float* bias = nullptr);
  const GemmDesc& desc() const { return desc_; }
  double flops() const { return 2.0 * desc_.batch * desc_.m * desc_.n * desc_.k; }

 private:
  struct Impl;
  GemmDesc desc_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zs::nn
