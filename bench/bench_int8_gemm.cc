// bench_int8_gemm: int8 frozen weights (issue 16) on the GPT's linear product y[M, N] = x[M, K] W^T
// (nn::Linear's forward: x bf16, W stored [N, K], fp32 output), timed four ways:
//   (a) deq+bf16  dequantize_int8_rows(W int8 + one fp32 scale per row -> bf16), rows split over
//                 the OpenMP team, then nn::Gemm bf16 (the GPT's own product and path);
//   (b) int8      x quantized per tensor to s8 (absmax -> 127, both passes timed, over the team),
//                 then oneDNN's s8 x s8 -> f32 matmul with runtime output scales s_x * s_w[n]
//                 (W the same int8 [N, K] rows as (a), read in place); primitive created once.
//   (b') fixed:   (b) with the output scales fixed to s_w[n] when the primitive is created (one
//                 primitive per weight; oneDNN then picks its brgemm kernel), then y *= s_x;
//   (c) per token: (b') with one scale per row of x (LLM.int8()'s vector-wise quantization of the
//                 activations), then y's rows times s_x[m].
// Every step listed is timed; the primitives are created once, outside the timing.
// The error columns are max |y - y_ref| against an fp32 GEMM of the unquantized x and W. The last
// line checks (b)'s kernel on integers: without VNNI, oneDNN's 16-bit pair sums saturate.
//
// Usage: bench_int8_gemm [threads=1] [repetitions=25]. Each figure is the median of the
// repetitions after 3 warm-up runs. Caps: ZS_MAX_ISA (ours), ONEDNN_MAX_CPU_ISA (oneDNN's).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/quantize.h"
#include "core/simd_dispatch.h"
#include "nn/gemm.h"
#include "nn/threads.h"

using namespace zs;

namespace {

// ---- activation quantization (the int8 path's own cost) ----

// max |x| of bf16 values as bits: for non-NaN values the magnitude order is the integer order.
ZS_SIMD_BODY(uint16_t, absmax_bits, (const uint16_t* x, size_t n)) {
  uint16_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t a = x[i] & 0x7fff;
    m = a > m ? a : m;
  }
  return m;
}
ZS_SIMD_DISPATCH(uint16_t, absmax_bits, (const uint16_t* x, size_t n), (x, n))

// q[i] = round_half_even(x[i] * inv) clamped to [-127, 127].
ZS_SIMD_BODY(void, quantize_bf16,
             (const uint16_t* __restrict x, size_t n, float inv, int8_t* __restrict q)) {
  for (size_t i = 0; i < n; ++i) {
    float v = std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16) * inv;
    v = v < -127.0f ? -127.0f : v;
    v = v > 127.0f ? 127.0f : v;
    q[i] = static_cast<int8_t>(static_cast<int>(std::nearbyint(v)));
  }
}
ZS_SIMD_DISPATCH(void, quantize_bf16,
                 (const uint16_t* __restrict x, size_t n, float inv, int8_t* __restrict q),
                 (x, n, inv, q))

constexpr int64_t kChunk = 16384;

ZS_SIMD_BODY(void, scale_row, (float* y, size_t n, float s)) {
  for (size_t i = 0; i < n; ++i) y[i] *= s;
}
ZS_SIMD_DISPATCH(void, scale_row, (float* y, size_t n, float s), (y, n, s))

// Per-tensor quantization of x[n] (bf16) over the OpenMP team; returns the scale.
float quantize_activations(const uint16_t* x, int64_t n, int8_t* q) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  uint16_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk;
    const uint16_t mc = absmax_bits(x + b, static_cast<size_t>(std::min(kChunk, n - b)));
    m = mc > m ? mc : m;
  }
  const float absmax = bf16_bits_to_fp32(m);
  const float scale = absmax > 0.0f ? absmax / 127.0f : 1.0f;
  const float inv = 127.0f / (absmax > 0.0f ? absmax : 127.0f);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk;
    quantize_bf16(x + b, static_cast<size_t>(std::min(kChunk, n - b)), inv, q + b);
  }
  return scale;
}

// Per-token (per-row) quantization of x[M, K] (bf16) over the OpenMP team: scales[M].
void quantize_activations_rows(const uint16_t* x, int64_t M, int64_t K, int8_t* q, float* scales) {
#pragma omp parallel for schedule(static) if (M * K > kChunk)
  for (int64_t r = 0; r < M; ++r) {
    const float absmax = bf16_bits_to_fp32(absmax_bits(x + r * K, static_cast<size_t>(K)));
    scales[r] = absmax > 0.0f ? absmax / 127.0f : 1.0f;
    quantize_bf16(x + r * K, static_cast<size_t>(K), 127.0f / (absmax > 0.0f ? absmax : 127.0f),
                  q + r * K);
  }
}

// dequantize_int8_rows over the OpenMP team, in blocks of rows (as the engine would split it).
void dequantize_rows_parallel(const int8_t* q, const float* s, int64_t rows, int64_t cols,
                              uint16_t* out) {
  const int64_t per = std::max<int64_t>(1, kChunk / cols);
  const int64_t blocks = (rows + per - 1) / per;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * per, nr = std::min(per, rows - r0);
    dequantize_int8_rows(q + r0 * cols, s + r0, static_cast<size_t>(nr), static_cast<size_t>(cols),
                         out + r0 * cols, DType::kBF16);
  }
}

// ---- oneDNN int8 matmul ----

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

// How the int8 product applies the scales (see the file's header).
enum class Scales {
  kRuntime,      // (b): output scales s_x * s_w[n] passed at each call
  kFixedTensor,  // (b'): output scales s_w[n] fixed at creation, then y *= s_x
  kFixedToken,   // (c): output scales s_w[n] fixed at creation, then y[m, :] *= s_x[m]
};

// y[M, N] (f32) = x_q[M, K] (s8) W_q^T, scaled, with W_q the [N, K] int8 rows read in place.
class Int8Matmul {
 public:
  // w_scales: the weight's row scales (copied when kFixed*).
  Int8Matmul(int64_t M, int64_t N, int64_t K, Scales mode, const float* w_scales)
      : mode_(mode), m_(M), n_(N), scales_(w_scales, w_scales + N) {
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    const dnnl::memory::desc src({M, K}, dt::s8, dims{K, 1});
    const dnnl::memory::desc wei({K, N}, dt::s8, dims{1, K});  // W^T of the [N, K] rows
    const dnnl::memory::desc dst({M, N}, dt::f32, dims{N, 1});
    dnnl::primitive_attr attr;
    // A per-row binary-mul post-op ([M, 1]) would apply per-token scales inside the product, but
    // oneDNN 2.6 then falls back to its reference kernel (1.5 s for 256 x 768 x 256).
    if (mode == Scales::kRuntime)
      attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
    else
      attr.set_output_scales(1 << 1, scales_);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, engine());
    impl_ = pd.impl_info_str();
    prim_ = dnnl::matmul(pd);
    scratch_.resize(pd.scratchpad_desc().get_size() + 1);
    src_ = dnnl::memory(src, engine(), DNNL_MEMORY_NONE);
    w_ = dnnl::memory(wei, engine(), DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dst, engine(), DNNL_MEMORY_NONE);
    args_ = {{DNNL_ARG_SRC, src_},
             {DNNL_ARG_WEIGHTS, w_},
             {DNNL_ARG_DST, dst_},
             {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), engine(), scratch_.data())}};
    if (mode == Scales::kRuntime)
      args_[DNNL_ARG_ATTR_OUTPUT_SCALES] =
          dnnl::memory({{N}, dt::f32, dims{1}}, engine(), scales_.data());
  }

  // x_scales: one (per tensor) or M (kFixedToken); w_scales: the weight's row scales.
  void run(const int8_t* xq, const float* x_scales, const int8_t* w, const float* w_scales,
           float* y) {
    if (mode_ == Scales::kRuntime)
      for (size_t n = 0; n < scales_.size(); ++n) scales_[n] = x_scales[0] * w_scales[n];
    src_.set_data_handle(const_cast<int8_t*>(xq));
    w_.set_data_handle(const_cast<int8_t*>(w));
    dst_.set_data_handle(y);
    prim_.execute(stream(), args_);
    stream().wait();
    if (mode_ == Scales::kRuntime) return;
    const bool token = mode_ == Scales::kFixedToken;
#pragma omp parallel for schedule(static) if (m_ * n_ > kChunk)
    for (int64_t m = 0; m < m_; ++m)
      scale_row(y + m * n_, static_cast<size_t>(n_), x_scales[token ? m : 0]);
  }
  const std::string& impl() const { return impl_; }

 private:
  Scales mode_;
  int64_t m_, n_;
  std::vector<float> scales_;
  std::string impl_;
  dnnl::matmul prim_;
  dnnl::memory src_, w_, dst_;
  std::vector<char> scratch_;
  std::unordered_map<int, dnnl::memory> args_;
};

// ---- harness ----

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

struct Row {
  double gemm_bf16, deq, deq_gemm;   // (a): the bf16 GEMM alone, the dequantization, both
  double quant_x, gemm_i8, int8;     // (b): quantizing x, the int8 GEMM, both
  double int8_fixed, int8_token;     // (b'), (c) in full
  double err_a, err_b, err_c, ymax;  // max |y - y_ref|, max |y_ref|
};

Row measure(int64_t M, int64_t N, int64_t K, int reps, std::mt19937& rng, std::string* impls) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(M * K), w(N * K);
  for (auto& v : x) v = normal(rng);          // a LayerNorm output
  for (auto& v : w) v = 0.02f * normal(rng);  // GPT-2's initialization
  std::vector<uint16_t> x16(x.size()), w16(w.size());
  fp32_to_bf16(x.data(), x16.data(), x.size());
  std::vector<int8_t> wq(w.size()), xq(x.size());
  std::vector<float> ws(N), xs(M);
  quantize_int8_rows(w.data(), N, K, wq.data(), ws.data());
  dequantize_int8_rows(wq.data(), ws.data(), N, K, w16.data(), DType::kBF16);

  // The fp32 reference of the unquantized operands, through nn.
  nn::GemmDesc d;
  d.m = M;
  d.n = N;
  d.k = K;
  d.trans_b = true;
  nn::Gemm ref_gemm(d, nullptr);
  std::vector<float> y_ref(M * N), y_a(M * N), y_b(M * N), y_c(M * N), y_f(M * N), y_t(M * N);
  ref_gemm.run(x.data(), w.data(), y_ref.data());
  d.dtype = DType::kBF16;
  nn::Gemm gemm(d, nullptr);  // nn::Linear's forward product
  Int8Matmul i8(M, N, K, Scales::kRuntime, ws.data()),
      i8p(M, N, K, Scales::kFixedTensor, ws.data()), i8t(M, N, K, Scales::kFixedToken, ws.data());
  if (impls)
    *impls = "bf16 " + nn::gemm_path(DType::kBF16).name + "; int8 [" + i8.impl() +
             "]; fixed scales [" + i8p.impl() + "]; per-token [" + i8t.impl() + "]";

  std::vector<double> t[8];
  for (int it = 0; it < reps + 3; ++it) {
    double v[8];
    auto t0 = Clock::now();
    gemm.run(x16.data(), w16.data(), y_t.data());  // the bf16 GEMM alone (W already bf16)
    v[0] = ms_since(t0);
    t0 = Clock::now();
    dequantize_rows_parallel(wq.data(), ws.data(), N, K, w16.data());  // (a)
    v[1] = ms_since(t0);
    gemm.run(x16.data(), w16.data(), y_a.data());
    v[2] = ms_since(t0);
    t0 = Clock::now();
    float sx = quantize_activations(x16.data(), M * K, xq.data());  // (b)
    v[3] = ms_since(t0);
    i8.run(xq.data(), &sx, wq.data(), ws.data(), y_b.data());
    v[5] = ms_since(t0);
    v[4] = v[5] - v[3];
    t0 = Clock::now();
    sx = quantize_activations(x16.data(), M * K, xq.data());  // (b')
    i8p.run(xq.data(), &sx, wq.data(), ws.data(), y_f.data());
    v[6] = ms_since(t0);
    t0 = Clock::now();
    quantize_activations_rows(x16.data(), M, K, xq.data(), xs.data());  // (c)
    i8t.run(xq.data(), xs.data(), wq.data(), ws.data(), y_c.data());
    v[7] = ms_since(t0);
    if (it >= 3)
      for (int k = 0; k < 8; ++k) t[k].push_back(v[k]);
  }
  Row r{median(t[0]),
        median(t[1]),
        median(t[2]),
        median(t[3]),
        median(t[4]),
        median(t[5]),
        median(t[6]),
        median(t[7]),
        0,
        0,
        0,
        0};
  r.err_a = max_abs_diff(y_a, y_ref);
  r.err_b = max_abs_diff(y_b, y_ref);
  r.err_c = max_abs_diff(y_c, y_ref);
  // (b') computes (b)'s integers and differs in the order of two fp32 multiplications only.
  const double fb = max_abs_diff(y_f, y_b);
  if (fb > 1e-5 * r.err_b + 1e-6) std::printf("warning: (b') differs from (b) by %g\n", fb);
  for (float v : y_ref) r.ymax = std::max(r.ymax, static_cast<double>(std::fabs(v)));
  return r;
}

// Whether the int8 product of (b) is exact on integers with |w| <= wmax (|x| <= 127): without
// VNNI, oneDNN pairs u8 x s8 products in 16-bit sums that saturate (vpmaddubsw). Returns the
// largest integer error of a 64 x 64 x 256 product.
double int8_integer_error(int wmax, std::mt19937& rng) {
  const int64_t M = 64, N = 64, K = 256;
  std::uniform_int_distribution<int> dx(-127, 127), dw(-wmax, wmax);
  std::vector<int8_t> x(M * K), w(N * K);
  for (auto& v : x) v = static_cast<int8_t>(dx(rng));
  for (auto& v : w) v = static_cast<int8_t>(dw(rng));
  const std::vector<float> ones(N, 1.0f);
  std::vector<float> y(M * N);
  Int8Matmul mm(M, N, K, Scales::kRuntime, ones.data());
  const float one = 1.0f;
  mm.run(x.data(), &one, w.data(), ones.data(), y.data());
  double worst = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t exact = 0;
      for (int64_t k = 0; k < K; ++k) exact += x[m * K + k] * w[n * K + k];
      worst = std::max(worst, std::fabs(static_cast<double>(y[m * N + n]) - exact));
    }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 25;
  nn::ThreadScope scope(threads);
  const char* onednn_cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  std::printf(
      "cpu: %s [%s]\nthreads %d, repetitions %d (median), zs level %s, "
      "ONEDNN_MAX_CPU_ISA=%s\n",
      cpu_model_name().c_str(), cpu_features_string().c_str(), threads, reps,
      std::string(simd_level_name(active_simd_level())).c_str(),
      onednn_cap ? onednn_cap : "(unset)");
  std::printf(
      "times in ms. (a) dequantize W + bf16 GEMM; (b) quantize x per tensor + int8 GEMM; (b') "
      "fixed W scales; (c) x per token. err = max |y - y_fp32|\n");
  std::printf("%5s %5s %5s | %7s %6s %7s | %7s %7s %7s | %7s %7s | %5s %5s | %7s %7s %7s %6s\n",
              "M", "N", "K", "bf16 mm", "deq W", "(a)", "quant x", "int8 mm", "(b)", "(b')", "(c)",
              "a/b", "a/c", "err (a)", "err (b)", "err (c)", "max|y|");
  std::mt19937 rng(2026);
  std::string impls;
  for (int64_t M : {256, 1024})
    for (int64_t C : {256, 512, 768})
      for (auto [N, K] : {std::pair<int64_t, int64_t>{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}}) {
        const Row r = measure(M, N, K, reps, rng, impls.empty() ? &impls : nullptr);
        std::printf(
            "%5lld %5lld %5lld | %7.3f %6.3f %7.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f | %5.2f "
            "%5.2f | %7.4f %7.4f %7.4f %6.2f\n",
            static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
            r.gemm_bf16, r.deq, r.deq_gemm, r.quant_x, r.gemm_i8, r.int8, r.int8_fixed,
            r.int8_token, r.deq_gemm / r.int8, r.deq_gemm / r.int8_token, r.err_a, r.err_b, r.err_c,
            r.ymax);
        std::fflush(stdout);
      }
  std::printf("kernels: %s\n", impls.c_str());
  std::mt19937 irng(7);
  std::printf("int8 kernel on integers, max error: weights in [-127, 127] %g, in [-63, 63] %g\n",
              int8_integer_error(127, irng), int8_integer_error(63, irng));
  return 0;
}
