#include "nn/cuda/gemm.h"

#include <cstdint>
#include <utility>

#include "core/error.h"
#include "device/cuda/cuda_error.h"

namespace zs::nn::gpu {

namespace {

void check_blas(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  fail(st == CUBLAS_STATUS_NOT_SUPPORTED ? ErrorCode::kUnsupported : ErrorCode::kInternal,
       "cublas: {} failed: {} ({})", what, cublasGetStatusName(st), cublasGetStatusString(st));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      fail(ErrorCode::kInvalidArgument, "cuda gemm: dtype {} is not a GEMM input type",
           dtype_name(dt));
  }
}

// A column-major layout of rows x cols with leading dimension ld, `batch` matrices `stride`
// elements apart.
cublasLtMatrixLayout_t make_layout(DType dt, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_blas(cublasLtMatrixLayoutCreate(&l, cuda_type(dt), static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(cols), ld),
             "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t b = static_cast<int32_t>(batch);
    check_blas(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)),
        "layout batch count");
    check_blas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof(stride)),
               "layout batch stride");
  }
  return l;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

CublasContext::CublasContext(Allocator& alloc, MemoryTracker* tracker, size_t workspace_bytes) {
  check_blas(cublasLtCreate(&lt_), "cublasLtCreate");
  check_blas(cublasCreate(&blas_), "cublasCreate");
  // The workspace holds every run's scratch: no GEMM allocates (cuBLAS would otherwise take
  // its own per stream).
  check_blas(cublasSetWorkspace(blas_, nullptr, 0), "cublasSetWorkspace");
  if (workspace_bytes > 0) {
    workspace_ = Buffer(workspace_bytes, MemCategory::kActivations, tracker, &alloc);
  }
}

CublasContext::~CublasContext() {
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (lt_ != nullptr) cublasLtDestroy(lt_);
}

// ---------------------------------------------------------------------------------------------

CudaGemm::CudaGemm(CublasContext& ctx, const CudaGemmDesc& d, int max_algos)
    : ctx_(&ctx), desc_(d) {
  ZS_CHECK(d.batch >= 1 && d.m >= 1 && d.n >= 1 && d.k >= 1, ErrorCode::kInvalidArgument,
           "cuda gemm: bad shape batch {} m {} n {} k {}", d.batch, d.m, d.n, d.k);
  ZS_CHECK(d.dtype == DType::kF32 || d.dtype == DType::kBF16 || d.dtype == DType::kF16,
           ErrorCode::kInvalidArgument, "cuda gemm: inputs in {} (fp32, bf16 or fp16 only)",
           dtype_name(d.dtype));
  ZS_CHECK(d.c_dtype == DType::kF32 || (d.c_dtype == d.dtype && !d.accumulate),
           ErrorCode::kInvalidArgument,
           "cuda gemm: output in {} with {} inputs{} (fp32, or the input dtype without "
           "accumulate)",
           dtype_name(d.c_dtype), dtype_name(d.dtype), d.accumulate ? " and accumulate" : "");
  ZS_CHECK(max_algos >= 1, ErrorCode::kInvalidArgument, "cuda gemm: max_algos {}", max_algos);

  // fp32 inputs stay fp32 (no TF32): the GPU path is compared with the CPU one at fp32 tolerance.
  check_blas(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
  // cuBLAS's A = our B, its B = our A (see the header).
  const cublasOperation_t ta = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_blas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
             "desc transa");
  check_blas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
             "desc transb");
  if (d.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    check_blas(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
        "desc epilogue");
    check_blas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                              sizeof(bias_type)),
               "desc bias type");
  }
  // A row-major stored matrix (rows x cols, row stride ld) is a column-major cols x rows matrix
  // with leading dimension ld; the strides of nn::GemmDesc (ld_*, batch_stride_*) carry over.
  la_ = make_layout(d.dtype, d.b_cols(), d.b_rows(), d.ld_b(), d.batch, d.batch_stride_b());
  lb_ = make_layout(d.dtype, d.a_cols(), d.a_rows(), d.ld_a(), d.batch, d.batch_stride_a());
  lc_ = make_layout(d.c_dtype, d.n, d.m, d.ld_c(), d.batch, d.batch_stride_c());

  cublasLtMatmulPreference_t pref = nullptr;
  check_blas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = ctx.workspace_bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  // The heuristic otherwise assumes 256-byte aligned operands (its default), and the engine hands
  // parameters at 64-byte offsets inside flat groups: ask only for algorithms that work with
  // kGemmAlignment-byte aligned pointers (run() checks them).
  const uint32_t align = kGemmAlignment;
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  }
  algos_.resize(static_cast<size_t>(max_algos));
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt(), op_, la_, lb_, lc_, lc_, pref,
                                                           max_algos, algos_.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  algos_.resize(st == CUBLAS_STATUS_SUCCESS ? static_cast<size_t>(found) : 0);
  if (algos_.empty()) {
    destroy();
    fail(ErrorCode::kUnsupported,
         "cuda gemm: cuBLASLt has no algorithm for batch {} m {} n {} k {} {}{} in {} -> {} "
         "({})",
         d.batch, d.m, d.n, d.k, d.trans_a ? "A^T" : "A", d.trans_b ? "B^T" : "B",
         dtype_name(d.dtype), dtype_name(d.c_dtype), cublasGetStatusString(st));
  }
}

void CudaGemm::destroy() {
  if (lc_ != nullptr) cublasLtMatrixLayoutDestroy(lc_);
  if (lb_ != nullptr) cublasLtMatrixLayoutDestroy(lb_);
  if (la_ != nullptr) cublasLtMatrixLayoutDestroy(la_);
  if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
  lc_ = lb_ = la_ = nullptr;
  op_ = nullptr;
}

CudaGemm::~CudaGemm() { destroy(); }

CudaGemm::CudaGemm(CudaGemm&& o) noexcept
    : ctx_(o.ctx_),
      desc_(o.desc_),
      op_(std::exchange(o.op_, nullptr)),
      la_(std::exchange(o.la_, nullptr)),
      lb_(std::exchange(o.lb_, nullptr)),
      lc_(std::exchange(o.lc_, nullptr)),
      algos_(std::move(o.algos_)),
      selected_(o.selected_) {}

CudaGemm& CudaGemm::operator=(CudaGemm&& o) noexcept {
  if (this != &o) {
    destroy();
    ctx_ = o.ctx_;
    desc_ = o.desc_;
    op_ = std::exchange(o.op_, nullptr);
    la_ = std::exchange(o.la_, nullptr);
    lb_ = std::exchange(o.lb_, nullptr);
    lc_ = std::exchange(o.lc_, nullptr);
    algos_ = std::move(o.algos_);
    selected_ = o.selected_;
  }
  return *this;
}

void CudaGemm::select(int i) {
  ZS_CHECK(i >= 0 && i < num_algos(), ErrorCode::kInvalidArgument, "cuda gemm: algorithm {} of {}",
           i, num_algos());
  selected_ = i;
}

void CudaGemm::run(const void* a, const void* b, void* c, cudaStream_t stream, const float* bias) {
  ZS_CHECK(op_ != nullptr, ErrorCode::kInvalidArgument, "cuda gemm: run() on an empty CudaGemm");
  ZS_CHECK(desc_.bias == (bias != nullptr), ErrorCode::kInvalidArgument,
           "cuda gemm: bias pointer {} but the descriptor says bias={}", bias ? "given" : "missing",
           desc_.bias);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kGemmAlignment == 0; };
  ZS_CHECK(aligned(a) && aligned(b) && aligned(c) && (bias == nullptr || aligned(bias)),
           ErrorCode::kInvalidArgument, "cuda gemm: operands must be {}-byte aligned",
           kGemmAlignment);
  if (bias != nullptr) {
    check_blas(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "desc bias pointer");
  }
  const float alpha = desc_.alpha;
  const float beta = desc_.accumulate ? 1.0f : 0.0f;
  const auto& algo = algos_[static_cast<size_t>(selected_)];
  check_blas(cublasLtMatmul(ctx_->lt(), op_, &alpha, b, la_, a, lb_, &beta, c, lc_, c, lc_,
                            &algo.algo, ctx_->workspace(), ctx_->workspace_bytes(), stream),
             "cublasLtMatmul");
}

}  // namespace zs::nn::gpu
