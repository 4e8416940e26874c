#include "nn/gemm.h"

#include <algorithm>
#include <unordered_map>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"

#ifdef ZS_NN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#else
#include <Eigen/Core>
#endif

namespace zs::nn {
namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

void check_desc(const GemmDesc& d) {
  ZS_CHECK(d.batch >= 1 && d.m >= 1 && d.n >= 1 && d.k >= 1, ErrorCode::kInvalidArgument,
           "gemm: bad shape batch {} m {} n {} k {}", d.batch, d.m, d.n, d.k);
  ZS_CHECK(d.dtype == DType::kF32 || d.dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gemm: inputs must be fp32 or bf16, got {}", dtype_name(d.dtype));
}

// Where the widened operands sit in the workspace: A at 0, B after it, Eigen's product after B.
struct WsLayout {
  size_t b_off = 0, r_off = 0, total = 0;
};
WsLayout ws_layout(const GemmDesc& d, bool widen, bool product) {
  WsLayout l;
  const size_t a = widen ? align_up(sizeof(float) * d.a_extent()) : 0;
  const size_t b = widen ? align_up(sizeof(float) * d.b_extent()) : 0;
  const size_t r = product ? align_up(sizeof(float) * d.m * d.n) : 0;
  l.b_off = a;
  l.r_off = a + b;
  l.total = a + b + r;
  return l;
}

}  // namespace

// Over the OpenMP team the product runs on (the ThreadScope of the calling unit): a serial copy
// would leave the other threads spinning at the product's barrier.
void widen_bf16(const void* src, float* dst, int64_t n) {
  constexpr int64_t kChunk = 16384;
  const auto* s = static_cast<const uint16_t*>(src);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk;
    bf16_to_fp32(s + b, dst + b, static_cast<size_t>(std::min(kChunk, n - b)));
  }
}

namespace {
// [Note: GEMM paths] widened: exact bf16 -> fp32 copies of the spans the operands cover, at the
// layout's offsets in the workspace; a and b then point at them.
void widen_operands(const GemmDesc& d, const WsLayout& l, void* ws, const void*& a,
                    const void*& b) {
  auto* w = static_cast<char*>(ws);
  float* a32 = reinterpret_cast<float*>(w);
  float* b32 = reinterpret_cast<float*>(w + l.b_off);
  widen_bf16(a, a32, d.a_extent());
  widen_bf16(b, b32, d.b_extent());
  a = a32;
  b = b32;
}
}  // namespace

void GemmWorkspace::reserve(size_t bytes) {
  if (bytes <= buf_.size()) return;
  buf_.reset();  // free first: the tracker never holds both
  buf_ = Buffer(bytes, MemCategory::kActivations, tracker_);
}

Gemm::Gemm() = default;
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

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

// A primitive descriptor for the product, or an empty one when oneDNN has no kernel for it.
dnnl::matmul::primitive_desc try_matmul(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                                        const dnnl::memory::desc* bias, const dnnl::memory::desc& c,
                                        const dnnl::primitive_attr& attr) {
  try {
    return bias ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, *bias, c), attr,
                                               cpu_engine())
                : dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return {};
  }
}

// The kernel oneDNN picks for a small product of this input type ("" when it has none).
std::string probe(dnnl::memory::data_type in) {
  using dims = dnnl::memory::dims;
  const dims ab{64, 64};
  const dnnl::memory::desc a(ab, in, dims{64, 1}), c(ab, dnnl::memory::data_type::f32, dims{64, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto pd = try_matmul(a, a, nullptr, c, attr);
  return pd ? pd.impl_info_str() : std::string();
}

GemmPath decide(DType dtype) {
  const std::string f32 = probe(dnnl::memory::data_type::f32);
  ZS_CHECK(!f32.empty(), ErrorCode::kUnsupported,
           "gemm: oneDNN offers no fp32 matmul on this CPU ({})", cpu_features_string());
  if (dtype == DType::kF32) return {false, "onednn f32 [" + f32 + "]"};
  // A reference kernel is oneDNN's scalar fallback: slower than widening by far.
  const std::string bf = probe(dnnl::memory::data_type::bf16);
  if (!bf.empty() && bf.find("ref") == std::string::npos)
    return {false, "onednn bf16 [" + bf + "]"};
  return {true, "onednn f32 on widened bf16 [" + f32 + "]"};
}
}  // namespace

const GemmPath& gemm_path(DType dtype) {
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gemm: inputs must be fp32 or bf16, got {}", dtype_name(dtype));
  static const GemmPath f32 = decide(DType::kF32);
  if (dtype == DType::kF32) return f32;
  static const GemmPath bf16 = decide(DType::kBF16);
  return bf16;
}

size_t gemm_workspace_need(const GemmDesc& d) {
  check_desc(d);
  return ws_layout(d, gemm_path(d.dtype).widened, false).total;
}

namespace {
// The product's memory descriptors and primitive descriptor (inputs in bf16, or fp32 when
// `widen`), refused when oneDNN has none; Gemm's constructor and gemm_scratchpad_bytes() alike.
struct MatmulDescs {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul::primitive_desc pd;
};
MatmulDescs matmul_descs(const GemmDesc& d, bool widen) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dt in = d.dtype == DType::kBF16 && !widen ? dt::bf16 : dt::f32;
  const bool b3 = d.batch > 1;
  // Logical (rows, cols) with strides (row stride rs, col stride cs, batch stride bs).
  auto mk = [&](int64_t r, int64_t c, int64_t rs, int64_t cs, int64_t bs, dt t) {
    return b3 ? dnnl::memory::desc(dims{d.batch, r, c}, t, dims{bs, rs, cs})
              : dnnl::memory::desc(dims{r, c}, t, dims{rs, cs});
  };
  const int64_t la = d.ld_a(), lb = d.ld_b();
  MatmulDescs m;
  m.a = d.trans_a ? mk(d.m, d.k, 1, la, d.batch_stride_a(), in)
                  : mk(d.m, d.k, la, 1, d.batch_stride_a(), in);
  m.b = d.trans_b ? mk(d.k, d.n, 1, lb, d.batch_stride_b(), in)
                  : mk(d.k, d.n, lb, 1, d.batch_stride_b(), in);
  m.c = mk(d.m, d.n, d.ld_c(), 1, d.batch_stride_c(), dt::f32);
  m.bias = b3 ? dnnl::memory::desc(dims{1, 1, d.n}, dt::f32, dims{d.n, d.n, 1})
              : dnnl::memory::desc(dims{1, d.n}, dt::f32, dims{d.n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
  if (d.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  m.pd = try_matmul(m.a, m.b, d.bias ? &m.bias : nullptr, m.c, attr);
  ZS_CHECK(m.pd, ErrorCode::kUnsupported,
           "gemm: oneDNN has no {} matmul for batch {} m {} n {} k {} on this CPU ({}; path {})",
           in == dt::bf16 ? "bf16" : "fp32", d.batch, d.m, d.n, d.k, cpu_features_string(),
           gemm_path(d.dtype).name);
  return m;
}
}  // namespace

size_t gemm_scratchpad_bytes(const GemmDesc& d, bool widened) {
  check_desc(d);
  return matmul_descs(d, widened).pd.scratchpad_desc().get_size();
}

struct Gemm::Impl {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias, scratch_mem;
  Buffer scratch;
  std::unordered_map<int, dnnl::memory> args;
  bool widen = false;
  WsLayout ws;
};

Gemm::Gemm(const GemmDesc& d, MemoryTracker* tracker, GemmWorkspace* ws)
    : desc_(d), impl_(std::make_unique<Impl>()) {
  check_desc(d);
  impl_->widen = gemm_path(d.dtype).widened;
  const MatmulDescs m = matmul_descs(d, impl_->widen);
  const dnnl::matmul::primitive_desc& pd = m.pd;
  auto& eng = cpu_engine();
  impl_->prim = dnnl::matmul(pd);
  const size_t sbytes = pd.scratchpad_desc().get_size();
  if (sbytes > 0) impl_->scratch = Buffer(sbytes, MemCategory::kActivations, tracker);
  impl_->a = dnnl::memory(m.a, eng, DNNL_MEMORY_NONE);
  impl_->b = dnnl::memory(m.b, eng, DNNL_MEMORY_NONE);
  impl_->c = dnnl::memory(m.c, eng, DNNL_MEMORY_NONE);
  impl_->args = {{DNNL_ARG_SRC, impl_->a}, {DNNL_ARG_WEIGHTS, impl_->b}, {DNNL_ARG_DST, impl_->c}};
  if (d.bias) {
    impl_->bias = dnnl::memory(m.bias, eng, DNNL_MEMORY_NONE);
    impl_->args[DNNL_ARG_BIAS] = impl_->bias;
  }
  impl_->scratch_mem = dnnl::memory(pd.scratchpad_desc(), eng,
                                    sbytes > 0 ? impl_->scratch.data() : DNNL_MEMORY_NONE);
  impl_->args[DNNL_ARG_SCRATCHPAD] = impl_->scratch_mem;
  impl_->ws = ws_layout(d, impl_->widen, false);
  if (impl_->ws.total > 0) {
    if (ws == nullptr) ws = (own_ws_ = std::make_unique<GemmWorkspace>(tracker)).get();
    ws->reserve(impl_->ws.total);
    ws_ = ws;
  }
}

void Gemm::run(const void* a, const void* b, float* c, const float* bias) {
  ZS_ASSERT(impl_ != nullptr);
  if (impl_->widen) widen_operands(desc_, impl_->ws, ws_->data(), a, b);
  execute(a, b, c, bias);
}

bool Gemm::widens() const { return impl_ != nullptr && impl_->widen; }

size_t Gemm::scratchpad_bytes() const { return impl_ != nullptr ? impl_->scratch.size() : 0; }

void Gemm::run_widened(const float* a, const float* b, float* c, const float* bias) {
  ZS_ASSERT(widens());
  execute(a, b, c, bias);
}

void Gemm::execute(const void* a, const void* b, float* c, const float* bias) {
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

// Eigen's run() widens into its own layout (the product follows the operands): no run_widened().
bool Gemm::widens() const { return false; }
size_t Gemm::scratchpad_bytes() const { return 0; }
void Gemm::run_widened(const float*, const float*, float*, const float*) { ZS_ASSERT(false); }

const GemmPath& gemm_path(DType dtype) {
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gemm: inputs must be fp32 or bf16, got {}", dtype_name(dtype));
  static const GemmPath f32{false, "eigen f32"};
  static const GemmPath bf16{true, "eigen f32 on widened bf16"};
  return dtype == DType::kF32 ? f32 : bf16;
}

size_t gemm_workspace_need(const GemmDesc& d) {
  check_desc(d);
  return ws_layout(d, d.dtype == DType::kBF16, true).total;
}

size_t gemm_scratchpad_bytes(const GemmDesc& d, bool) {
  check_desc(d);
  return 0;
}

struct Gemm::Impl {
  WsLayout ws;
};

Gemm::Gemm(const GemmDesc& d, MemoryTracker* tracker, GemmWorkspace* ws)
    : desc_(d), impl_(std::make_unique<Impl>()) {
  check_desc(d);
  impl_->ws = ws_layout(d, d.dtype == DType::kBF16, true);
  if (ws == nullptr) ws = (own_ws_ = std::make_unique<GemmWorkspace>(tracker)).get();
  ws->reserve(impl_->ws.total);
  ws_ = ws;
}

void Gemm::run(const void* a, const void* b, float* c, const float* bias) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<> >;
  const GemmDesc& d = desc_;
  auto* w = static_cast<char*>(ws_->data());
  if (d.dtype == DType::kBF16) widen_operands(d, impl_->ws, w, a, b);
  const float* af = static_cast<const float*>(a);
  const float* bf = static_cast<const float*>(b);
  for (int64_t i = 0; i < d.batch; ++i) {
    const CMap A(af + i * d.batch_stride_a(), d.a_rows(), d.a_cols(),
                 Eigen::OuterStride<>(d.ld_a()));
    const CMap Bm(bf + i * d.batch_stride_b(), d.b_rows(), d.b_cols(),
                  Eigen::OuterStride<>(d.ld_b()));
    Eigen::Map<Mat, 0, Eigen::OuterStride<> > ci(c + i * d.batch_stride_c(), d.m, d.n,
                                                 Eigen::OuterStride<>(d.ld_c()));
    Eigen::Map<Mat> r(reinterpret_cast<float*>(w + impl_->ws.r_off), d.m, d.n);
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

}  // namespace zs::nn
