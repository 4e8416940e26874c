// nn::Int8Linear ([Note: int8 linear] in nn/int8_linear.h) against a double-precision reference of
// the int8 weight's exact values (q * sw): forward and backward-data on the int8 GEMM path within
// the activation quantization's bound, outlier columns (threshold, cap), zero and non-finite
// rows, adversarial weight rows; the dequantize path bit for bit against nn::Linear on the
// dequantized weight; the path choice and its refusal without VNNI. The AVX2 twin
// (int8_linear_test_avx2) runs it with both ISA caps at AVX2, where the int8 GEMM must not be
// chosen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/quantize.h"
#include "nn/int8_linear.h"
#include "nn/linear.h"
#include "nn/threads.h"

namespace zs::nn {
namespace {

struct Problem {
  int64_t M, K, N;            // y [M, N] = x [M, K] W^T
  std::vector<float> x;       // [M, K]
  std::vector<int8_t> q;      // [N, K]
  std::vector<float> sw;      // [N]
  std::vector<float> b;       // [N]
  std::vector<float> y0;      // [M, N], the residual's input
  std::vector<uint16_t> x16;  // x in bf16
};

Problem make_problem(int64_t M, int64_t K, int64_t N, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Problem p{M, K, N, {}, {}, {}, {}, {}, {}};
  p.x.resize(M * K);
  for (float& v : p.x) v = nd(rng);
  std::vector<float> w(N * K);
  for (float& v : w) v = 0.02f * nd(rng);
  p.q.resize(N * K);
  p.sw.resize(N);
  quantize_int8_rows(w.data(), N, K, p.q.data(), p.sw.data());
  p.b.resize(N);
  for (float& v : p.b) v = 0.1f * nd(rng);
  p.y0.resize(M * N);
  for (float& v : p.y0) v = nd(rng);
  p.x16.resize(p.x.size());
  return p;
}

void to_bf16(Problem& p) {
  fp32_to_bf16(p.x.data(), p.x16.data(), p.x.size());
  bf16_to_fp32(p.x16.data(), p.x.data(), p.x.size());  // x as the layer sees it
}

double wval(const Problem& p, int64_t n, int64_t k) {
  return static_cast<double>(p.q[n * p.K + k]) * p.sw[n];
}

// max over elements of |y - ref| / bound, where ref is the double product of x and the int8
// weight's values and bound the [Note: int8 linear] error bound: (absmax_kept(x[m]) / 254)
// sum_k |W[n, k]| for the quantized columns, plus fp32 rounding 2^-20 (sum_k |x W| + |b| + |y0|).
// `outliers`: columns computed in fp32 (excluded from absmax_kept).
double forward_error_ratio(const Problem& p, const std::vector<float>& y, bool bias, bool residual,
                           const std::vector<int>& outliers) {
  double worst = 0;
  for (int64_t m = 0; m < p.M; ++m) {
    double absmax = 0;
    for (int64_t k = 0; k < p.K; ++k)
      if (std::find(outliers.begin(), outliers.end(), k) == outliers.end())
        absmax = std::max(absmax, std::fabs(static_cast<double>(p.x[m * p.K + k])));
    for (int64_t n = 0; n < p.N; ++n) {
      double ref = 0, sum_abs = 0, sum_w = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double t = p.x[m * p.K + k] * wval(p, n, k);
        ref += t;
        sum_abs += std::fabs(t);
        if (std::find(outliers.begin(), outliers.end(), k) == outliers.end())
          sum_w += std::fabs(wval(p, n, k));
      }
      double extra = 0;
      if (bias) {
        ref += p.b[n];
        extra += std::fabs(p.b[n]);
      }
      if (residual) {
        ref += p.y0[m * p.N + n];
        extra += std::fabs(p.y0[m * p.N + n]);
      }
      const double bound = absmax / 254.0 * sum_w * (1 + 1e-5) + std::ldexp(sum_abs + extra, -20);
      const double err = std::fabs(y[m * p.N + n] - ref);
      if (bound == 0) {
        EXPECT_EQ(err, 0) << "m " << m << " n " << n;
      } else {
        worst = std::max(worst, err / bound);
      }
    }
  }
  return worst;
}

std::vector<float> run_forward(const Problem& p, const Int8LinearDesc& d,
                               Int8Linear* keep = nullptr) {
  static GemmWorkspace gws, iws;  // outlive the layers kept in `keep`
  Int8Linear lin(d, nullptr, &gws, &iws);
  std::vector<float> y = p.y0;
  lin.forward(d.mm == DType::kBF16 ? static_cast<const void*>(p.x16.data()) : p.x.data(),
              {p.q.data(), p.sw.data()}, d.bias ? p.b.data() : nullptr, y.data());
  if (keep) *keep = std::move(lin);
  return y;
}

Int8LinearDesc desc_of(const Problem& p, DType mm, Int8Path path, bool bias, bool residual,
                       float threshold = 0.0f) {
  Int8LinearDesc d;
  d.M = p.M;
  d.in = p.K;
  d.out = p.N;
  d.bias = bias;
  d.residual = residual;
  d.mm = mm;
  d.path = path;
  d.outlier_threshold = threshold;
  return d;
}

bool capped_to_avx2() {
  const char* z = std::getenv("ZS_MAX_ISA");
  const char* o = std::getenv("ONEDNN_MAX_CPU_ISA");
  return z && std::string(z) == "avx2" && o && std::string(o) == "AVX2";
}

TEST(Int8Linear, PathChoice) {
  std::printf("cpu: %s [%s]\n%s\n", cpu_model_name().c_str(), cpu_features_string().c_str(),
              int8_gemm_description().c_str());
  // Zen 3 and other AVX2-only CPUs (emulated by both caps): never the int8 GEMM.
  if (capped_to_avx2()) {
    EXPECT_FALSE(int8_gemm_available());
  }
  EXPECT_EQ(Int8Linear::resolves_to_int8(Int8Path::kAuto), int8_gemm_available());
  EXPECT_FALSE(Int8Linear::resolves_to_int8(Int8Path::kDequantize));
  Problem p = make_problem(8, 32, 16, 1);
  GemmWorkspace gws, iws;
  if (!int8_gemm_available()) {
    try {
      Int8Linear lin(desc_of(p, DType::kF32, Int8Path::kInt8Gemm, false, false), nullptr, &gws,
                     &iws);
      ADD_FAILURE() << "kInt8Gemm accepted without the int8 GEMM";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("VNNI"), std::string::npos) << e.what();
    }
  }
  Int8Linear lin(desc_of(p, DType::kF32, Int8Path::kAuto, false, false), nullptr, &gws, &iws);
  EXPECT_EQ(lin.int8_gemm(), int8_gemm_available());
  // Bad descriptions.
  for (float t : {-1.0f, std::numeric_limits<float>::infinity()}) {
    EXPECT_THROW(
        Int8Linear(desc_of(p, DType::kF32, Int8Path::kAuto, false, false, t), nullptr, &gws, &iws),
        Error);
  }
  EXPECT_THROW(
      Int8Linear(desc_of(p, DType::kF16, Int8Path::kAuto, false, false), nullptr, &gws, &iws),
      Error);
}

// The dequantize path is nn::Linear on the dequantized weight, bit for bit.
TEST(Int8Linear, DequantizePathIsLinearOnDequantizedWeight) {
  ThreadScope scope(2);
  for (DType mm : {DType::kF32, DType::kBF16}) {
    Problem p = make_problem(24, 64, 48, 2);
    if (mm == DType::kBF16) to_bf16(p);
    const void* x = mm == DType::kBF16 ? static_cast<const void*>(p.x16.data()) : p.x.data();
    std::vector<uint16_t> w(p.N * p.K * 2);
    dequantize_int8_rows(p.q.data(), p.sw.data(), p.N, p.K, w.data(), mm);
    Linear ref(p.M, static_cast<int>(p.K), static_cast<int>(p.N), true, true, mm, nullptr);
    std::vector<float> y_ref = p.y0, dx_ref(p.M * p.K), dx(p.M * p.K);
    ref.forward(x, w.data(), p.b.data(), y_ref.data());
    Int8Linear lin;
    const std::vector<float> y =
        run_forward(p, desc_of(p, mm, Int8Path::kDequantize, true, true), &lin);
    EXPECT_EQ(0, std::memcmp(y.data(), y_ref.data(), 4 * y.size())) << dtype_name(mm);
    // dy: x's shape reused as [M, N] values.
    std::vector<float> dy(p.M * p.N);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    for (float& v : dy) v = nd(rng);
    std::vector<uint16_t> dy16(dy.size());
    fp32_to_bf16(dy.data(), dy16.data(), dy.size());
    const void* dyp = mm == DType::kBF16 ? static_cast<const void*>(dy16.data()) : dy.data();
    ref.backward_data(dyp, w.data(), dx_ref.data());
    lin.backward_data(dyp, {p.q.data(), p.sw.data()}, dx.data());
    EXPECT_EQ(0, std::memcmp(dx.data(), dx_ref.data(), 4 * dx.size())) << dtype_name(mm);
  }
}

TEST(Int8Linear, ForwardWithinBound) {
  if (!int8_gemm_available()) GTEST_SKIP() << "no int8 GEMM here: " << int8_gemm_description();
  ThreadScope scope(2);
  for (DType mm : {DType::kF32, DType::kBF16})
    for (int variant = 0; variant < 4; ++variant) {
      const bool bias = variant & 1, residual = variant & 2;
      Problem p = make_problem(37, 96, 80, 10 + variant);
      if (mm == DType::kBF16) to_bf16(p);
      const auto y = run_forward(p, desc_of(p, mm, Int8Path::kInt8Gemm, bias, residual));
      const double r = forward_error_ratio(p, y, bias, residual, {});
      std::printf("%s bias %d residual %d: max error / bound %.3f\n", dtype_name(mm).data(), bias,
                  residual, r);
      EXPECT_LE(r, 1.0);
      EXPECT_GT(r, 0.05);  // the bound is not vacuous
    }
}

// Two feature columns 40x larger than the rest (LLM.int8()'s systematic outliers): with the
// decomposition they are computed in fp32 and the rest quantizes at its own scale.
TEST(Int8Linear, OutlierColumns) {
  if (!int8_gemm_available()) GTEST_SKIP() << "no int8 GEMM here: " << int8_gemm_description();
  ThreadScope scope(2);
  Problem p = make_problem(64, 128, 96, 20);
  for (int64_t m = 0; m < p.M; ++m) {
    p.x[m * p.K + 3] *= 40.0f;
    p.x[m * p.K + 77] *= 25.0f;
  }
  Int8Linear lin;
  const auto y0 = run_forward(p, desc_of(p, DType::kF32, Int8Path::kInt8Gemm, true, false, 0.0f));
  const auto y6 =
      run_forward(p, desc_of(p, DType::kF32, Int8Path::kInt8Gemm, true, false, 6.0f), &lin);
  EXPECT_EQ(lin.last_outliers(), 2);
  const double r6 = forward_error_ratio(p, y6, true, false, {3, 77});
  EXPECT_LE(r6, 1.0);
  // Errors against the exact product, without and with the decomposition.
  auto max_err = [&](const std::vector<float>& y) {
    double e = 0;
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N; ++n) {
        double ref = p.b[n];
        for (int64_t k = 0; k < p.K; ++k) ref += p.x[m * p.K + k] * wval(p, n, k);
        e = std::max(e, std::fabs(y[m * p.N + n] - ref));
      }
    return e;
  };
  const double e0 = max_err(y0), e6 = max_err(y6);
  std::printf("outlier columns: max error threshold 0: %.3g, threshold 6: %.3g\n", e0, e6);
  EXPECT_LT(e6 * 5, e0);
  // The cap: one column kept, the larger one (column 3).
  Int8LinearDesc d = desc_of(p, DType::kF32, Int8Path::kInt8Gemm, true, false, 6.0f);
  d.max_outliers = 1;
  const auto y1 = run_forward(p, d, &lin);
  EXPECT_EQ(lin.last_outliers(), 1);
  EXPECT_LE(forward_error_ratio(p, y1, true, false, {3}), 1.0);
  // A threshold above every column: no outliers, the same bits as threshold 0.
  const auto yh =
      run_forward(p, desc_of(p, DType::kF32, Int8Path::kInt8Gemm, true, false, 1e6f), &lin);
  EXPECT_EQ(lin.last_outliers(), 0);
  EXPECT_EQ(0, std::memcmp(yh.data(), y0.data(), 4 * y0.size()));
}

// Zero rows give exactly the bias (+ residual); a row with NaN or inf gives NaN there only.
TEST(Int8Linear, ZeroAndNonFiniteRows) {
  if (!int8_gemm_available()) GTEST_SKIP() << "no int8 GEMM here: " << int8_gemm_description();
  Problem p = make_problem(6, 40, 24, 30);
  std::fill(p.x.begin() + 1 * p.K, p.x.begin() + 2 * p.K, 0.0f);
  p.x[3 * p.K + 5] = std::numeric_limits<float>::quiet_NaN();
  p.x[4 * p.K + 7] = std::numeric_limits<float>::infinity();
  const auto y = run_forward(p, desc_of(p, DType::kF32, Int8Path::kInt8Gemm, true, true));
  for (int64_t n = 0; n < p.N; ++n) {
    EXPECT_EQ(y[1 * p.N + n], p.b[n] + p.y0[1 * p.N + n]);
    EXPECT_TRUE(std::isnan(y[3 * p.N + n]));
    EXPECT_TRUE(std::isnan(y[4 * p.N + n]));
    EXPECT_TRUE(std::isfinite(y[0 * p.N + n]) && std::isfinite(y[5 * p.N + n]));
  }
}

// Weight rows: all equal, one huge outlier element, zeros (scale 0), subnormal.
TEST(Int8Linear, AdversarialWeightRows) {
  if (!int8_gemm_available()) GTEST_SKIP() << "no int8 GEMM here: " << int8_gemm_description();
  Problem p = make_problem(16, 64, 8, 40);
  std::vector<float> w(p.N * p.K);
  std::mt19937 rng(41);
  std::normal_distribution<float> nd;
  for (float& v : w) v = 0.02f * nd(rng);
  std::fill(w.begin(), w.begin() + p.K, 0.5f);
  w[1 * p.K + 9] = 1e4f;
  std::fill(w.begin() + 2 * p.K, w.begin() + 3 * p.K, 0.0f);
  for (int64_t k = 0; k < p.K; ++k) w[3 * p.K + k] = 1e-39f * ((k % 3) - 1.0f);
  quantize_int8_rows(w.data(), p.N, p.K, p.q.data(), p.sw.data());
  for (DType mm : {DType::kF32, DType::kBF16}) {
    if (mm == DType::kBF16) to_bf16(p);
    const auto y = run_forward(p, desc_of(p, mm, Int8Path::kInt8Gemm, true, false));
    EXPECT_LE(forward_error_ratio(p, y, true, false, {}), 1.0) << dtype_name(mm);
  }
}

// dx = dy W on the int8 GEMM path: bound (absmax_n |dy sw| / 254) sum_n |q[n, k]| + rounding.
TEST(Int8Linear, BackwardDataWithinBound) {
  if (!int8_gemm_available()) GTEST_SKIP() << "no int8 GEMM here: " << int8_gemm_description();
  ThreadScope scope(2);
  for (DType mm : {DType::kF32, DType::kBF16}) {
    Problem p = make_problem(33, 72, 56, 50);
    std::vector<float> dy(p.M * p.N);
    std::mt19937 rng(51);
    std::normal_distribution<float> nd;
    for (float& v : dy) v = nd(rng);
    std::fill(dy.begin() + 2 * p.N, dy.begin() + 3 * p.N, 0.0f);  // a zero row
    std::vector<uint16_t> dy16(dy.size());
    if (mm == DType::kBF16) {
      fp32_to_bf16(dy.data(), dy16.data(), dy.size());
      bf16_to_fp32(dy16.data(), dy.data(), dy.size());
    }
    Int8LinearDesc d = desc_of(p, mm, Int8Path::kInt8Gemm, false, false);
    d.backward = Int8Backward::kInt8Gemm;
    GemmWorkspace gws, iws;
    Int8Linear lin(d, nullptr, &gws, &iws);
    ASSERT_TRUE(lin.int8_backward());
    std::vector<float> dx(p.M * p.K);
    lin.backward_data(mm == DType::kBF16 ? static_cast<const void*>(dy16.data()) : dy.data(),
                      {p.q.data(), p.sw.data()}, dx.data());
    double worst = 0;
    for (int64_t m = 0; m < p.M; ++m) {
      double absmax = 0;
      for (int64_t n = 0; n < p.N; ++n)
        absmax = std::max(absmax, std::fabs(static_cast<double>(dy[m * p.N + n]) * p.sw[n]));
      for (int64_t k = 0; k < p.K; ++k) {
        double ref = 0, sum_abs = 0, sum_q = 0;
        for (int64_t n = 0; n < p.N; ++n) {
          const double t = dy[m * p.N + n] * wval(p, n, k);
          ref += t;
          sum_abs += std::fabs(t);
          sum_q += std::abs(p.q[n * p.K + k]);
        }
        const double bound = absmax / 254.0 * sum_q * (1 + 1e-5) + std::ldexp(sum_abs, -20);
        const double err = std::fabs(dx[m * p.K + k] - ref);
        if (m == 2) {
          EXPECT_EQ(dx[m * p.K + k], 0.0f);
        }
        if (bound > 0) worst = std::max(worst, err / bound);
      }
    }
    std::printf("%s backward-data: max error / bound %.3f\n", dtype_name(mm).data(), worst);
    EXPECT_LE(worst, 1.0);
    EXPECT_GT(worst, 0.05);
  }
}

}  // namespace
}  // namespace zs::nn
