#include "nn/gemm.h"

#include <vector>

#include "runtime/core/buffer.h"
#include "runtime/core/convert.h"
#include "runtime/core/error.h"

#ifdef ZS_NN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#else
#include <Eigen/Core>
#endif

namespace zs::nn {

#ifdef ZS_NN_HAVE_DNNL

bool gemm_uses_onednn() { return true; }

namespace {
dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}
}  // namespace

struct Gemm::Impl {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias, scratch_mem;
  Buffer scratch;
  std::unordered_map<int, dnnl::memory> args;
};

Gemm::Gemm(const GemmDesc& d, MemoryTracker* tracker) : desc_(d), impl_(std::make_unique<Impl>()) {
  ZS_CHECK(d.batch >= 1 && d.m >= 1 && d.n >= 1 && d.k >= 1, ErrorCode::kInvalidArgument,
           "gemm: bad shape batch {} m {} n {} k {}", d.batch, d.m, d.n, d.k);
  ZS_CHECK(d.dtype == DType::kF32 || d.dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gemm: inputs must be fp32 or bf16, got {}", dtype_name(d.dtype));
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dt in = d.dtype == DType::kBF16 ? dt::bf16 : dt::f32;
  const bool b3 = d.batch > 1;
  // Logical (rows, cols) with strides (row stride rs, col stride cs, batch stride bs).
  auto mk = [&](int64_t r, int64_t c, int64_t rs, int64_t cs, int64_t bs, dt t) {
    return b3 ? dnnl::memory::desc(dims{d.batch, r, c}, t, dims{bs, rs, cs})
              : dnnl::memory::desc(dims{r, c}, t, dims{rs, cs});
  };
  const int64_t la = d.ld_a(), lb = d.ld_b();
  const auto a_md = d.trans_a ? mk(d.m, d.k, 1, la, d.batch_stride_a(), in)
                              : mk(d.m, d.k, la, 1, d.batch_stride_a(), in);
  const auto b_md = d.trans_b ? mk(d.k, d.n, 1, lb, d.batch_stride_b(), in)
                              : mk(d.k, d.n, lb, 1, d.batch_stride_b(), in);
  const auto c_md = mk(d.m, d.n, d.ld_c(), 1, d.batch_stride_c(), dt::f32);
  const auto bias_md = b3 ? dnnl::memory::desc(dims{1, 1, d.n}, dt::f32, dims{d.n, d.n, 1})
                          : dnnl::memory::desc(dims{1, d.n}, dt::f32, dims{d.n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
  if (d.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  auto& eng = cpu_engine();
  dnnl::matmul::primitive_desc pd =
      d.bias
          ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, eng)
          : dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  impl_->prim = dnnl::matmul(pd);
  const size_t sbytes = pd.scratchpad_desc().get_size();
  if (sbytes > 0) impl_->scratch = Buffer(sbytes, MemCategory::kActivations, tracker);
  impl_->a = dnnl::memory(a_md, eng, DNNL_MEMORY_NONE);
  impl_->b = dnnl::memory(b_md, eng, DNNL_MEMORY_NONE);
  impl_->c = dnnl::memory(c_md, eng, DNNL_MEMORY_NONE);
  impl_->args = {{DNNL_ARG_SRC, impl_->a}, {DNNL_ARG_WEIGHTS, impl_->b}, {DNNL_ARG_DST, impl_->c}};
  if (d.bias) {
    impl_->bias = dnnl::memory(bias_md, eng, DNNL_MEMORY_NONE);
    impl_->args[DNNL_ARG_BIAS] = impl_->bias;
  }
  impl_->scratch_mem = dnnl::memory(pd.scratchpad_desc(), eng,
                                    sbytes > 0 ? impl_->scratch.data() : DNNL_MEMORY_NONE);
  impl_->args[DNNL_ARG_SCRATCHPAD] = impl_->scratch_mem;
}

void Gemm::run(const void* a, const void* b, float* c, const float* bias) {
  ZS_ASSERT(impl_ != nullptr);
  impl_->a.set_data_handle(const_cast<void*>(a));
  impl_->b.set_data_handle(const_cast<void*>(b));
  impl_->c.set_data_handle(c);
  if (desc_.bias) {
    ZS_ASSERT(bias != nullptr);
    impl_->bias.set_data_handle(const_cast<float*>(bias));
  }
  impl_->prim.execute(cpu_stream(), impl_->args);
  cpu_stream().wait();
}

#else  // Eigen

bool gemm_uses_onednn() { return false; }

struct Gemm::Impl {
  Buffer a32, b32;  // fp32 copies of bf16 inputs
  Buffer r;         // [m][n] product of one batch entry
};

Gemm::Gemm(const GemmDesc& d, MemoryTracker* tracker) : desc_(d), impl_(std::make_unique<Impl>()) {
  ZS_CHECK(d.batch >= 1 && d.m >= 1 && d.n >= 1 && d.k >= 1, ErrorCode::kInvalidArgument,
           "gemm: bad shape batch {} m {} n {} k {}", d.batch, d.m, d.n, d.k);
  ZS_CHECK(d.dtype == DType::kF32 || d.dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gemm: inputs must be fp32 or bf16, got {}", dtype_name(d.dtype));
  if (d.dtype == DType::kBF16) {
    impl_->a32 = Buffer(sizeof(float) * d.a_extent(), MemCategory::kActivations, tracker);
    impl_->b32 = Buffer(sizeof(float) * d.b_extent(), MemCategory::kActivations, tracker);
  }
  impl_->r = Buffer(sizeof(float) * d.m * d.n, MemCategory::kActivations, tracker);
}

void Gemm::run(const void* a, const void* b, float* c, const float* bias) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<> >;
  const GemmDesc& d = desc_;
  const float* af = static_cast<const float*>(a);
  const float* bf = static_cast<const float*>(b);
  if (d.dtype == DType::kBF16) {
    bf16_to_fp32(static_cast<const uint16_t*>(a), impl_->a32.as<float>(), d.a_extent());
    bf16_to_fp32(static_cast<const uint16_t*>(b), impl_->b32.as<float>(), d.b_extent());
    af = impl_->a32.as<float>();
    bf = impl_->b32.as<float>();
  }
  for (int64_t i = 0; i < d.batch; ++i) {
    const CMap A(af + i * d.batch_stride_a(), d.a_rows(), d.a_cols(),
                 Eigen::OuterStride<>(d.ld_a()));
    const CMap Bm(bf + i * d.batch_stride_b(), d.b_rows(), d.b_cols(),
                  Eigen::OuterStride<>(d.ld_b()));
    Eigen::Map<Mat, 0, Eigen::OuterStride<> > ci(c + i * d.batch_stride_c(), d.m, d.n,
                                                 Eigen::OuterStride<>(d.ld_c()));
    Eigen::Map<Mat> r(impl_->r.as<float>(), d.m, d.n);
    if (!d.trans_a && !d.trans_b) r.noalias() = A * Bm;
    if (d.trans_a && !d.trans_b) r.noalias() = A.transpose() * Bm;
    if (!d.trans_a && d.trans_b) r.noalias() = A * Bm.transpose();
    if (d.trans_a && d.trans_b) r.noalias() = A.transpose() * Bm.transpose();
    if (d.alpha != 1.0f) r *= d.alpha;
    if (d.bias) r.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, d.n);
    if (d.accumulate)
      ci = r + ci;
    else
      ci = r;
  }
}

#endif

Gemm::Gemm() = default;
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

}  // namespace zs::nn
