// Matrix products for the CPU layers: C (= or +=) alpha * op(A) * op(B) (+ bias), fp32 or bf16
// inputs, fp32 accumulation and output. One Gemm object per shape, created once (oneDNN
// primitive + preallocated scratchpad when built with oneDNN, Eigen otherwise); run() allocates
// nothing.
//
// [Note: GEMM paths] The path for each input dtype is decided once per process, at the first
// Gemm or gemm_path() call, by asking the library for a kernel rather than reading CPU flags:
//   fp32  oneDNN's fp32 matmul (Eigen in builds without oneDNN)
//   bf16  native: oneDNN's bf16 matmul, when oneDNN offers a non-reference kernel for it on this
//         CPU (AVX-512 BF16, AMX); widened: otherwise (AVX2 CPUs, ONEDNN_MAX_CPU_ISA=AVX2, Eigen
//         builds) the bf16 operands are widened to fp32 (exact) into a planned workspace and the
//         fp32 matmul runs. Both keep the contract (16-bit inputs, fp32 accumulation and output);
//         only the summation order inside the library differs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"

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

// True when this build calls oneDNN (else Eigen).
bool gemm_uses_onednn();

// How products with `dtype` inputs run in this process ([Note: GEMM paths]).
struct GemmPath {
  bool widened = false;  // 16-bit operands widened to fp32 before an fp32 product
  // e.g. "onednn bf16 [brg:avx512_core_amx]", "onednn f32 on widened bf16 [brg:avx2]",
  // "eigen f32".
  std::string name;
};
// dtype: fp32 or bf16 (else zs::Error(kInvalidArgument)). Decided once; thread-safe.
const GemmPath& gemm_path(DType dtype);

// Scratch shared by the GEMMs of one model, which run one at a time: the widened operands (and,
// in the Eigen build, the product before it is added to C). Each Gemm reserves its need when it
// is constructed, the buffer grows then (never inside a step) to the largest need, registered
// under kActivations. gemm_workspace_need() is that need, for planners.
class GemmWorkspace {
 public:
  explicit GemmWorkspace(MemoryTracker* tracker = nullptr) : tracker_(tracker) {}
  void reserve(size_t bytes);
  void* data() { return buf_.data(); }
  size_t size() const { return buf_.size(); }

 private:
  MemoryTracker* tracker_;
  Buffer buf_;
};

// Thread-safety: run() may not be called concurrently on one object.
// bf16 -> fp32 of n elements over the calling unit's OpenMP team (exact). For callers that widen
// an operand once for several products (Gemm::run_widened).
void widen_bf16(const void* src, float* dst, int64_t n);

// The workspace bytes a product of `desc` needs on this process's path: the widened A and B
// extents (64-byte aligned) when its inputs are widened, plus Eigen's m x n product.
size_t gemm_workspace_need(const GemmDesc& desc);

// [Note: GEMM scratchpads] oneDNN's scratchpad for a product of `desc`: the bytes a Gemm of it
// registers under kActivations besides the workspace. The library sizes it for this CPU and for
// the OpenMP team of the calling thread (a planner asks under the ThreadScope the model builds
// its products with); `widened`: bf16 inputs run as an fp32 product ([Note: GEMM paths]). Builds
// a primitive descriptor only, allocates nothing; 0 in Eigen builds. Throws as Gemm's constructor.
size_t gemm_scratchpad_bytes(const GemmDesc& desc, bool widened);

class Gemm {
 public:
  Gemm();
  // Throws zs::Error(kInvalidArgument) for a bad shape or dtype. The library's scratchpad goes to
  // `tracker` under kActivations; widened operands (and Eigen's product) live in `ws`, which must
  // outlive the Gemm, or in a workspace of the Gemm's own when `ws` is null.
  Gemm(const GemmDesc& desc, MemoryTracker* tracker, GemmWorkspace* ws = nullptr);
  ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  void run(const void* a, const void* b, float* c, const float* bias = nullptr);
  // True when run() widens bf16 operands into the workspace before an fp32 product (oneDNN
  // without a bf16 kernel). Then a caller that reuses an operand across products may widen it
  // once itself and call run_widened() with the fp32 copies (the same bits as run()).
  bool widens() const;
  void run_widened(const float* a, const float* b, float* c, const float* bias = nullptr);
  const GemmDesc& desc() const { return desc_; }
  // The library's scratchpad this Gemm registered (gemm_scratchpad_bytes(); 0 with Eigen).
  size_t scratchpad_bytes() const;
  double flops() const { return 2.0 * desc_.batch * desc_.m * desc_.n * desc_.k; }

 private:
  void execute(const void* a, const void* b, float* c, const float* bias);
  struct Impl;
  GemmDesc desc_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<GemmWorkspace> own_ws_;  // when the constructor got none
  GemmWorkspace* ws_ = nullptr;
};

}  // namespace zs::nn
