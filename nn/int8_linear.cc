#include "nn/int8_linear.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/quantize.h"
#include "core/simd_dispatch.h"

#ifdef ZS_NN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace zs::nn {

namespace {

using i32a = int32_t __attribute__((may_alias));  // acc may live in y's or dx's bytes

int64_t al64(int64_t b) { return (b + 63) / 64 * 64; }

// ---- row kernels, dispatched on ZS_MAX_ISA (core/simd_dispatch.h) ----

[[gnu::always_inline]] inline float load(const float* x, int64_t i) { return x[i]; }
[[gnu::always_inline]] inline float load(const uint16_t* x, int64_t i) {
  return std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16);
}

// The value quantized at column i: x, with masked columns (outliers) as 0, times a column scale.
template <class T, bool kMask, bool kScale>
[[gnu::always_inline]] inline float value(const T* x, const uint32_t* m, const float* s,
                                          int64_t i) {
  float v = load(x, i);
  if constexpr (kMask) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & m[i]);
  if constexpr (kScale) v *= s[i];
  return v;
}

// Quantizes one row ([Note: int8 linear] step 2); returns its scale absmax / 127 (0 for a zero
// row, NaN for a row with inf or NaN).
template <class T, bool kMask, bool kScale>
[[gnu::always_inline]] inline float quantize_row_t(const T* x, const uint32_t* m, const float* s,
                                                   int64_t n, int8_t* q) {
  // max |v| as bits: for non-negative floats the integer order is the value order, and inf and
  // NaN come out above every finite value.
  uint32_t mx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(value<T, kMask, kScale>(x, m, s, i)) & 0x7fffffffu;
    mx = a > mx ? a : mx;
  }
  const float absmax = std::bit_cast<float>(mx);
  if (absmax == 0.0f || !(absmax <= FLT_MAX)) {
    for (int64_t i = 0; i < n; ++i) q[i] = 0;
    return absmax == 0.0f ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const float inv = 127.0f / absmax;
  if (!(inv <= FLT_MAX)) {  // absmax subnormal: scale in double
    const double dinv = 127.0 / absmax;
    for (int64_t i = 0; i < n; ++i)
      q[i] = quantize_int8_value(static_cast<float>(value<T, kMask, kScale>(x, m, s, i) * dinv));
    return absmax / 127.0f;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = value<T, kMask, kScale>(x, m, s, i) * inv;
    v = v < -127.0f ? -127.0f : v;
    v = v > 127.0f ? 127.0f : v;
    // Round half to even (the default rounding mode) by the 1.5 * 2^23 trick, exact for |v| < 2^22.
    v = (v + 12582912.0f) - 12582912.0f;
    q[i] = static_cast<int8_t>(static_cast<int32_t>(v));
  }
  return absmax / 127.0f;
}

ZS_SIMD_BODY(float, qrow_f32, (const float* x, const uint32_t* m, int64_t n, int8_t* q)) {
  return m ? quantize_row_t<float, true, false>(x, m, nullptr, n, q)
           : quantize_row_t<float, false, false>(x, nullptr, nullptr, n, q);
}
ZS_SIMD_DISPATCH(float, qrow_f32, (const float* x, const uint32_t* m, int64_t n, int8_t* q),
                 (x, m, n, q))
ZS_SIMD_BODY(float, qrow_bf16, (const uint16_t* x, const uint32_t* m, int64_t n, int8_t* q)) {
  return m ? quantize_row_t<uint16_t, true, false>(x, m, nullptr, n, q)
           : quantize_row_t<uint16_t, false, false>(x, nullptr, nullptr, n, q);
}
ZS_SIMD_DISPATCH(float, qrow_bf16, (const uint16_t* x, const uint32_t* m, int64_t n, int8_t* q),
                 (x, m, n, q))
ZS_SIMD_BODY(float, qrow_scaled_f32, (const float* x, const float* s, int64_t n, int8_t* q)) {
  return quantize_row_t<float, false, true>(x, nullptr, s, n, q);
}
ZS_SIMD_DISPATCH(float, qrow_scaled_f32, (const float* x, const float* s, int64_t n, int8_t* q),
                 (x, s, n, q))
ZS_SIMD_BODY(float, qrow_scaled_bf16, (const uint16_t* x, const float* s, int64_t n, int8_t* q)) {
  return quantize_row_t<uint16_t, false, true>(x, nullptr, s, n, q);
}
ZS_SIMD_DISPATCH(float, qrow_scaled_bf16, (const uint16_t* x, const float* s, int64_t n, int8_t* q),
                 (x, s, n, q))

// cm[j] = max(cm[j], |x[r, j]|) over rows r of x [rows, ld], columns [0, n), as bits.
template <class T>
[[gnu::always_inline]] inline void colmax_t(const T* x, int64_t rows, int64_t ld, int64_t n,
                                            uint32_t* cm) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t a = std::bit_cast<uint32_t>(load(x + r * ld, j)) & 0x7fffffffu;
      cm[j] = a > cm[j] ? a : cm[j];
    }
}
ZS_SIMD_BODY(void, colmax_f32,
             (const float* x, int64_t rows, int64_t ld, int64_t n, uint32_t* cm)) {
  colmax_t(x, rows, ld, n, cm);
}
ZS_SIMD_DISPATCH(void, colmax_f32,
                 (const float* x, int64_t rows, int64_t ld, int64_t n, uint32_t* cm),
                 (x, rows, ld, n, cm))
ZS_SIMD_BODY(void, colmax_bf16,
             (const uint16_t* x, int64_t rows, int64_t ld, int64_t n, uint32_t* cm)) {
  colmax_t(x, rows, ld, n, cm);
}
ZS_SIMD_DISPATCH(void, colmax_bf16,
                 (const uint16_t* x, int64_t rows, int64_t ld, int64_t n, uint32_t* cm),
                 (x, rows, ld, n, cm))

// Step 4: y[n] = (float(acc[n]) * sx) * sw[n] (+ b[n]) (+ y[n]); acc may be y's own bytes.
ZS_SIMD_BODY(void, epilogue_row,
             (const i32a* acc, float sx, const float* sw, const float* b, bool residual, float* y,
              int64_t n)) {
  if (sw == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(acc[i]) * sx;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float t = (static_cast<float>(acc[i]) * sx) * sw[i];
    if (b) t = t + b[i];
    if (residual) t = t + y[i];
    y[i] = t;
  }
}
ZS_SIMD_DISPATCH(void, epilogue_row,
                 (const i32a* acc, float sx, const float* sw, const float* b, bool residual,
                  float* y, int64_t n),
                 (acc, sx, sw, b, residual, y, n))

// y[n] += a * w[n].
ZS_SIMD_BODY(void, axpy, (float a, const float* w, float* y, int64_t n)) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + a * w[i];
}
ZS_SIMD_DISPATCH(void, axpy, (float a, const float* w, float* y, int64_t n), (a, w, y, n))

// ---- workspace layout ----

// Byte offsets in the int8 workspace. Forward (int8 GEMM): qx [M, in] s8, sx [M], acc [M, out]
// s32 (residual only: else y's bytes), colmax [in] and outlier indices [in] (threshold > 0), wo
// [cap, out] fp32 (the outlier columns of W, dequantized and transposed). Backward (int8 GEMM):
// qd [M, out] s8, sd [M] (acc in dx's bytes). Dequantize path: Wdeq [out, in] mm. Each part
// starts 64-byte aligned; forward, backward and Wdeq overlap (never live together).
struct Layout {
  int64_t qx = 0, sx = 0, acc = -1, colmax = -1, idx = -1, wo = -1, fwd = 0;
  int64_t qd = 0, sd = 0, bwd = 0;
  int64_t wdeq = 0;
  int64_t total = 0;
};

Layout layout_of(const Int8LinearDesc& d, bool int8, bool int8_bwd) {
  Layout l;
  int64_t o = 0;
  if (int8) {
    l.qx = o;
    o += al64(d.M * d.in);
    l.sx = o;
    o += al64(4 * d.M);
    if (d.residual) {
      l.acc = o;
      o += al64(4 * d.M * d.out);
    }
    if (d.outlier_threshold > 0.0f) {
      l.colmax = o;
      o += al64(4 * d.in);
      l.idx = o;
      o += al64(4 * d.in);
      l.wo = o;
      o += al64(4 * d.outlier_cap() * d.out);
    }
    l.fwd = o;
  }
  if (int8_bwd) {
    l.qd = 0;
    l.sd = al64(d.M * d.out);
    l.bwd = l.sd + al64(4 * d.M);
  }
  l.wdeq = (!int8 || !int8_bwd) ? al64(d.out * d.in * static_cast<int64_t>(dtype_size(d.mm))) : 0;
  l.total = std::max({l.fwd, l.bwd, l.wdeq});
  return l;
}

void check_desc(const Int8LinearDesc& d) {
  ZS_CHECK(d.M >= 1 && d.in >= 1 && d.out >= 1, ErrorCode::kInvalidArgument,
           "int8 linear: bad shape M {} in {} out {}", d.M, d.in, d.out);
  ZS_CHECK(d.mm == DType::kF32 || d.mm == DType::kBF16, ErrorCode::kInvalidArgument,
           "int8 linear: inputs must be fp32 or bf16, got {}", dtype_name(d.mm));
  ZS_CHECK(std::isfinite(d.outlier_threshold) && d.outlier_threshold >= 0.0f,
           ErrorCode::kInvalidArgument,
           "int8 linear: outlier threshold {} must be a finite number >= 0 (0 = off)",
           d.outlier_threshold);
  ZS_CHECK(d.max_outliers >= 0 && d.max_outliers <= d.in, ErrorCode::kInvalidArgument,
           "int8 linear: max_outliers {} is outside 0 (the default) .. in = {}", d.max_outliers,
           d.in);
}

}  // namespace

// ---- oneDNN ----

#ifdef ZS_NN_HAVE_DNNL

namespace {
dnnl::engine& int8_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& int8_stream() {
  static dnnl::stream s(int8_engine());
  return s;
}

// acc[m, n] (s32) = a[m, k] (s8, rows of lda) b (s8): b_rows_n: b stored [n][k] (W^T of W's
// rows) or else [k][n]. The primitive descriptor, with a user scratchpad.
dnnl::matmul::primitive_desc s8_matmul_desc(int64_t m, int64_t n, int64_t k, bool b_rows_n) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md({m, k}, dt::s8, dims{k, 1});
  const dnnl::memory::desc b_md({k, n}, dt::s8, b_rows_n ? dims{1, k} : dims{n, 1});
  const dnnl::memory::desc c_md({m, n}, dt::s32, dims{n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, int8_engine());
}

// The product of s8_matmul_desc(m, n, k, b_rows_n).
struct S8Matmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  Buffer scratch;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;

  S8Matmul() = default;
  S8Matmul(int64_t m, int64_t n, int64_t k, bool b_rows_n, MemoryTracker* tracker) {
    const dnnl::matmul::primitive_desc pd = s8_matmul_desc(m, n, k, b_rows_n);
    impl = pd.impl_info_str();
    prim = dnnl::matmul(pd);
    const size_t sbytes = pd.scratchpad_desc().get_size();
    if (sbytes > 0) scratch = Buffer(sbytes, MemCategory::kActivations, tracker);
    a = dnnl::memory(pd.src_desc(), int8_engine(), DNNL_MEMORY_NONE);
    b = dnnl::memory(pd.weights_desc(), int8_engine(), DNNL_MEMORY_NONE);
    c = dnnl::memory(pd.dst_desc(), int8_engine(), DNNL_MEMORY_NONE);
    args = {{DNNL_ARG_SRC, a},
            {DNNL_ARG_WEIGHTS, b},
            {DNNL_ARG_DST, c},
            {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), int8_engine(),
                                               sbytes > 0 ? scratch.data() : DNNL_MEMORY_NONE)}};
  }
  void run(const int8_t* pa, const int8_t* pb, void* pc) {
    a.set_data_handle(const_cast<int8_t*>(pa));
    b.set_data_handle(const_cast<int8_t*>(pb));
    c.set_data_handle(pc);
    prim.execute(int8_stream(), args);
    int8_stream().wait();
  }
};

// oneDNN's scratchpad of S8Matmul(m, n, k, b_rows_n) for the calling thread's team.
size_t s8_scratchpad_bytes(int64_t m, int64_t n, int64_t k, bool b_rows_n) {
  return s8_matmul_desc(m, n, k, b_rows_n).scratchpad_desc().get_size();
}

// The kernel oneDNN picks for a small s8 product ("" when it has none).
std::string probe_s8() {
  try {
    return S8Matmul(64, 64, 64, true, nullptr).impl;
  } catch (const dnnl::error&) {
    return {};
  }
}

bool onednn_has_vnni() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  // dnnl_cpu_isa_t is a bit set: 0x40 marks avx512_core_vnni and the levels above it, 0x400
  // avx2_vnni.
  return (isa & 0x40u) != 0 || (isa & 0x400u) != 0;
}
}  // namespace

struct Int8Linear::Prims {
  S8Matmul fwd, bwd;
  int64_t scratchpad_bytes() const {
    return static_cast<int64_t>(fwd.scratch.size() + bwd.scratch.size());
  }
};

bool int8_gemm_available() {
  static const bool ok = [] {
    if (!int8_gemm_supported() || !onednn_has_vnni()) return false;
    const std::string impl = probe_s8();
    return !impl.empty() && impl.find("ref") == std::string::npos;
  }();
  return ok;
}

std::string int8_gemm_description() {
  if (!int8_gemm_available())
    return "int8 gemm: unavailable (no VNNI under the caps: cpu [" + cpu_features_string() +
           "], zs level " + std::string(simd_level_name(active_simd_level())) + ")";
  return "int8 gemm: onednn s8s8s32 [" + probe_s8() + "]";
}

#else

struct Int8Linear::Prims {
  int64_t scratchpad_bytes() const { return 0; }
};
bool int8_gemm_available() { return false; }
std::string int8_gemm_description() { return "int8 gemm: unavailable (built without oneDNN)"; }

#endif

bool Int8Linear::resolves_to_int8(Int8Path path) {
  return path == Int8Path::kInt8Gemm || (path == Int8Path::kAuto && int8_gemm_available());
}

int64_t Int8Linear::workspace_need(const Int8LinearDesc& d, bool int8_gemm, bool int8_backward) {
  return layout_of(d, int8_gemm, int8_gemm && int8_backward).total;
}

int64_t Int8Linear::scratchpad_need(const Int8LinearDesc& d, bool int8_gemm, bool int8_backward,
                                    bool widened) {
  int64_t b = 0;
  const bool bwd = int8_gemm && int8_backward;
  if (!int8_gemm || !bwd) {  // the constructor's deq_
    for (const GemmDesc& g : Linear::gemm_descs(d.M, static_cast<int>(d.in),
                                                static_cast<int>(d.out), d.bias, d.residual, d.mm))
      b += static_cast<int64_t>(gemm_scratchpad_bytes(g, widened));
  }
#ifdef ZS_NN_HAVE_DNNL
  if (int8_gemm) b += static_cast<int64_t>(s8_scratchpad_bytes(d.M, d.out, d.in, true));
  if (bwd) b += static_cast<int64_t>(s8_scratchpad_bytes(d.M, d.in, d.out, false));
#endif
  return b;
}

int64_t Int8Linear::scratchpad_bytes() const {
  return deq_.scratchpad_bytes() + (prims_ != nullptr ? prims_->scratchpad_bytes() : 0);
}

Int8Linear::Int8Linear() = default;
Int8Linear::~Int8Linear() = default;
Int8Linear::Int8Linear(Int8Linear&&) noexcept = default;
Int8Linear& Int8Linear::operator=(Int8Linear&&) noexcept = default;

Int8Linear::Int8Linear(const Int8LinearDesc& d, MemoryTracker* tracker, GemmWorkspace* gemm_ws,
                       GemmWorkspace* int8_ws)
    : d_(d) {
  check_desc(d);
  ZS_CHECK(d.path != Int8Path::kInt8Gemm || int8_gemm_available(), ErrorCode::kUnsupported,
           "int8 linear: the int8 GEMM was asked for, but this process cannot run it correctly "
           "({}); without VNNI oneDNN's int8 products saturate. Use the dequantize path",
           int8_gemm_description());
  int8_ = resolves_to_int8(d.path);
  int8_bwd_ = int8_ && d.backward == Int8Backward::kInt8Gemm;
  if (!int8_ || !int8_bwd_) {
    deq_ = Linear(d.M, static_cast<int>(d.in), static_cast<int>(d.out), d.bias, d.residual, d.mm,
                  tracker, gemm_ws);
  }
  prims_ = std::make_unique<Prims>();
#ifdef ZS_NN_HAVE_DNNL
  if (int8_) prims_->fwd = S8Matmul(d.M, d.out, d.in, true, tracker);
  if (int8_bwd_) prims_->bwd = S8Matmul(d.M, d.in, d.out, false, tracker);
#endif
  const int64_t need = workspace_need(d, int8_, int8_bwd_);
  if (need > 0) {
    ZS_CHECK(int8_ws != nullptr, ErrorCode::kInvalidArgument,
             "int8 linear: needs a workspace of {} bytes", need);
    int8_ws->reserve(static_cast<size_t>(need));
  }
  ws_ = int8_ws;
}

namespace {

// W's rows dequantized into `out` in mm, rows split over the OpenMP team.
void dequantize_weight(Int8Weight w, int64_t rows, int64_t cols, void* out, DType mm) {
  const int64_t per = std::max<int64_t>(1, 16384 / cols);
  const int64_t blocks = (rows + per - 1) / per;
  const int64_t e = static_cast<int64_t>(dtype_size(mm));
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * per, nr = std::min(per, rows - r0);
    dequantize_int8_rows(w.q + r0 * cols, w.scales + r0, static_cast<size_t>(nr),
                         static_cast<size_t>(cols), static_cast<char*>(out) + r0 * cols * e, mm);
  }
}

#ifdef ZS_NN_HAVE_DNNL
// The outlier columns of x [M, K] (bf16 when bf, else fp32): those whose largest |value| passes
// `threshold` (NaN columns count), at most `cap` (the largest maxima kept), ascending in idx.
// cm [K] is scratch for the column maxima; when any column is an outlier it becomes the mask
// that leaves them out of the quantization (*mask = cm), else *mask stays null. Returns |O|.
int64_t find_outliers(const void* x, bool bf, int64_t M, int64_t K, float threshold, int64_t cap,
                      uint32_t* cm, int32_t* idx, uint32_t** mask) {
  std::fill(cm, cm + K, 0u);
  constexpr int64_t kCols = 64;
  const int64_t blocks = (K + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (M * K > 16384)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kCols, n = std::min(kCols, K - j0);
    if (bf)
      colmax_bf16(static_cast<const uint16_t*>(x) + j0, M, K, n, cm + j0);
    else
      colmax_f32(static_cast<const float*>(x) + j0, M, K, n, cm + j0);
  }
  const uint32_t t = std::bit_cast<uint32_t>(threshold);
  int64_t n_out = 0;
  for (int64_t j = 0; j < K; ++j)
    if (cm[j] > t) idx[n_out++] = static_cast<int32_t>(j);  // NaN columns count as outliers
  if (n_out > cap) {  // keep the cap columns with the largest maxima, then ascending order
    std::nth_element(idx, idx + cap, idx + n_out,
                     [&](int32_t a, int32_t c) { return cm[a] != cm[c] ? cm[a] > cm[c] : a < c; });
    n_out = cap;
    std::sort(idx, idx + n_out);
  }
  if (n_out > 0) {
    // The colmax bits are no longer needed: the same bytes become the mask.
    *mask = cm;
    std::fill(cm, cm + K, 0xffffffffu);
    for (int64_t i = 0; i < n_out; ++i) cm[idx[i]] = 0u;
  }
  return n_out;
}

// Row-wise quantization of x [M, K] into qx [M, K] with one scale per row in sx [M]; masked-out
// columns (mask[j] == 0) are left out. `mask` may be null.
void quantize_rows(const void* x, bool bf, const uint32_t* mask, int64_t M, int64_t K, int8_t* qx,
                   float* sx) {
#pragma omp parallel for schedule(static) if (M * K > 16384)
  for (int64_t m = 0; m < M; ++m) {
    sx[m] = bf ? qrow_bf16(static_cast<const uint16_t*>(x) + m * K, mask, K, qx + m * K)
               : qrow_f32(static_cast<const float*>(x) + m * K, mask, K, qx + m * K);
  }
}

// y [M, N] += x's outlier columns idx[0, n_out) in fp32 against W's dequantized columns (W [N,
// K]); wo [n_out, N] is scratch for those columns.
void add_outlier_columns(const void* x, bool bf, Int8Weight w, const int32_t* idx, int64_t n_out,
                         int64_t M, int64_t K, int64_t N, float* wo, float* y) {
#pragma omp parallel for schedule(static) if (n_out * N > 16384)
  for (int64_t i = 0; i < n_out; ++i)
    for (int64_t n = 0; n < N; ++n)
      wo[i * N + n] = static_cast<float>(w.q[n * K + idx[i]]) * w.scales[n];
#pragma omp parallel for schedule(static) if (M * N * n_out > 16384)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < n_out; ++i) {
      const int64_t j = idx[i];
      const float xv = bf ? load(static_cast<const uint16_t*>(x) + m * K, j)
                          : load(static_cast<const float*>(x) + m * K, j);
      axpy(xv, wo + i * N, y + m * N, N);
    }
}
#endif

}  // namespace

void Int8Linear::forward(const void* x, Int8Weight w, const float* b, float* y) {
  ZS_ASSERT(prims_ != nullptr);
  ZS_ASSERT(!d_.bias || b != nullptr);
  const Layout l = layout_of(d_, int8_, int8_bwd_);
  char* ws = static_cast<char*>(ws_ ? ws_->data() : nullptr);
  if (!int8_) {
    dequantize_weight(w, d_.out, d_.in, ws, d_.mm);
    deq_.forward(x, ws, b, y);
    last_outliers_ = 0;
    return;
  }
#ifdef ZS_NN_HAVE_DNNL
  const int64_t M = d_.M, K = d_.in, N = d_.out;
  const bool bf = d_.mm == DType::kBF16;
  // 1. Outlier columns: O (ascending), and the mask that leaves them out of the quantization.
  int64_t n_out = 0;
  int32_t* idx = nullptr;
  uint32_t* mask = nullptr;
  if (d_.outlier_threshold > 0.0f) {
    idx = reinterpret_cast<int32_t*>(ws + l.idx);
    n_out = find_outliers(x, bf, M, K, d_.outlier_threshold, d_.outlier_cap(),
                          reinterpret_cast<uint32_t*>(ws + l.colmax), idx, &mask);
  }
  last_outliers_ = n_out;
  // 2. Row-wise quantization of x.
  int8_t* qx = reinterpret_cast<int8_t*>(ws + l.qx);
  float* sx = reinterpret_cast<float*>(ws + l.sx);
  quantize_rows(x, bf, mask, M, K, qx, sx);
  // 3. The int8 product; 4. its scales, bias and residual.
  void* acc = d_.residual ? static_cast<void*>(ws + l.acc) : static_cast<void*>(y);
  prims_->fwd.run(qx, w.q, acc);
  const i32a* a32 = static_cast<const i32a*>(acc);
#pragma omp parallel for schedule(static) if (M * N > 16384)
  for (int64_t m = 0; m < M; ++m)
    epilogue_row(a32 + m * N, sx[m], w.scales, b, d_.residual, y + m * N, N);
  // 5. The outlier columns in fp32 against W's dequantized columns.
  if (n_out > 0) {
    add_outlier_columns(x, bf, w, idx, n_out, M, K, N, reinterpret_cast<float*>(ws + l.wo), y);
  }
#endif
}

void Int8Linear::backward_data(const void* dy, Int8Weight w, float* dx) {
  ZS_ASSERT(prims_ != nullptr);
  const Layout l = layout_of(d_, int8_, int8_bwd_);
  char* ws = static_cast<char*>(ws_ ? ws_->data() : nullptr);
  if (!int8_bwd_) {
    dequantize_weight(w, d_.out, d_.in, ws, d_.mm);
    deq_.backward_data(dy, ws, dx);
    return;
  }
#ifdef ZS_NN_HAVE_DNNL
  const int64_t M = d_.M, K = d_.in, N = d_.out;
  const bool bf = d_.mm == DType::kBF16;
  int8_t* qd = reinterpret_cast<int8_t*>(ws + l.qd);
  float* sd = reinterpret_cast<float*>(ws + l.sd);
#pragma omp parallel for schedule(static) if (M * N > 16384)
  for (int64_t m = 0; m < M; ++m) {
    sd[m] = bf ? qrow_scaled_bf16(static_cast<const uint16_t*>(dy) + m * N, w.scales, N, qd + m * N)
               : qrow_scaled_f32(static_cast<const float*>(dy) + m * N, w.scales, N, qd + m * N);
  }
  prims_->bwd.run(qd, w.q, dx);
  const i32a* a32 = reinterpret_cast<const i32a*>(dx);
#pragma omp parallel for schedule(static) if (M * K > 16384)
  for (int64_t m = 0; m < M; ++m)
    epilogue_row(a32 + m * K, sd[m], nullptr, nullptr, false, dx + m * K, K);
#endif
}

}  // namespace zs::nn
