// cuBLASLt matrix products for the GPU layers, the device twin of nn/gemm.h:
//   C (= or +=) alpha * op(A) * op(B) (+ bias), row-major, A/B in fp32, bf16 or fp16, fp32
//   accumulation (CUBLAS_COMPUTE_32F), C in fp32 (or the input dtype).
// One CudaGemm per shape, made at set-up: the matmul descriptors and the heuristic's algorithm
// list are computed once (the cached heuristics) and run() only enqueues cublasLtMatmul on the
// given stream, with the context's preallocated workspace. Nothing in run() allocates or
// synchronizes.
//
// Row-major on a column-major library: C[m,n] = op(A) op(B) is computed as the column-major
// C^T[n,m] = op(B)^T op(A)^T, i.e. cuBLAS's "A" is our B and its "B" our A.
//
// Thread-safety: a CublasContext and the CudaGemms built on it are used from one thread (run()
// calls on the same stream may share the workspace; different streams need different contexts).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "nn/gemm.h"

namespace zs::nn::gpu {

// Every pointer handed to CudaGemm::run() (A, B, C and the bias) must be aligned to this many
// bytes; the algorithms are chosen for it (cuBLASLt's heuristic assumes 256 unless told).
constexpr unsigned kGemmAlignment = 16;

// cuBLAS and cuBLASLt handles and one GEMM workspace on the current device.
class CublasContext {
 public:
  // workspace_bytes from `alloc` (a CudaCachingAllocator; tracked under kActivations in
  // `tracker`). 32 MiB is what cuBLAS recommends for Hopper.
  CublasContext(Allocator& alloc, MemoryTracker* tracker, size_t workspace_bytes = 32u << 20);
  ~CublasContext();
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  cublasLtHandle_t lt() const { return lt_; }
  cublasHandle_t blas() const { return blas_; }
  void* workspace() { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.size(); }

 private:
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Buffer workspace_;
};

// The same fields and meaning as nn::GemmDesc (batch, m, n, k, trans_a, trans_b, dtype of A and
// B, alpha, accumulate, bias, row and batch strides), plus the dtype of C (fp32 by default;
// bf16/fp16 only when equal to dtype and without accumulate).
struct CudaGemmDesc : GemmDesc {
  DType c_dtype = DType::kF32;
};

class CudaGemm {
 public:
  CudaGemm() = default;
  // Throws zs::Error(kInvalidArgument) for a bad shape or dtype, zs::Error(kUnsupported) when
  // cuBLASLt has no algorithm for it. Asks the heuristic for up to `max_algos` algorithms.
  CudaGemm(CublasContext& ctx, const CudaGemmDesc& desc, int max_algos = 8);
  ~CudaGemm();
  CudaGemm(CudaGemm&& o) noexcept;
  CudaGemm& operator=(CudaGemm&& o) noexcept;
  CudaGemm(const CudaGemm&) = delete;
  CudaGemm& operator=(const CudaGemm&) = delete;

  // Enqueues the product on `stream` (device pointers; bias [n] fp32 when desc.bias).
  void run(const void* a, const void* b, void* c, cudaStream_t stream, const float* bias = nullptr);

  // The heuristic's algorithms, best first; run() uses selected() (0 unless changed). For the
  // benchmark that times every candidate against the heuristic's first choice.
  int num_algos() const { return static_cast<int>(algos_.size()); }
  void select(int i);
  int selected() const { return selected_; }

  const CudaGemmDesc& desc() const { return desc_; }
  double flops() const { return 2.0 * desc_.batch * desc_.m * desc_.n * desc_.k; }

 private:
  void destroy();

  CublasContext* ctx_ = nullptr;
  CudaGemmDesc desc_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos_;
  int selected_ = 0;
};

}  // namespace zs::nn::gpu
