// Does AdamW with 8-bit (and bf16) states train like fp32 AdamW? 300 steps of a least-squares fit
// whose columns span three decades of scale (so v spans six within a block), fp32 states vs
// bf16 vs int8 with each code book; and the measurement behind [Note: state code book choice]:
// the round-trip error of fp32 AdamW's own m and v, and of its update m / (sqrt(v) + eps), under
// each book. Prints the table it asserts on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/state_quant.h"
#include "optim/cpu_adam.h"
#include "optim/state_adam.h"

namespace zs::optim {
namespace {

constexpr int kRows = 4096, kCols = 1024, kBatch = 512, kSteps = 300;

// y = A w* + noise, A's column j scaled by 10^u_j, u_j uniform in [-1, 1].
struct Problem {
  std::vector<float> a, y;  // a [kRows, kCols] row-major, y [kRows]
};

Problem make_problem() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  std::vector<float> col_scale(kCols), w(kCols);
  for (int j = 0; j < kCols; ++j) {
    col_scale[j] = std::pow(10.0f, ud(rng));
    w[j] = nd(rng) / col_scale[j] * 0.1f;
  }
  Problem pr;
  pr.a.resize(size_t{kRows} * kCols);
  pr.y.resize(kRows);
  for (int i = 0; i < kRows; ++i) {
    double yi = 0;
    for (int j = 0; j < kCols; ++j) {
      const float x = nd(rng) * col_scale[j];
      pr.a[static_cast<size_t>(i) * kCols + j] = x;
      yi += static_cast<double>(x) * w[j];
    }
    pr.y[i] = static_cast<float>(yi) + 0.1f * nd(rng);
  }
  return pr;
}

// Without g: the loss 0.5 / rows * |A w - y|^2 over all rows. With g: 0, and g = the gradient
// (fp32) of the loss of rows [first, first + kBatch) (mod kRows): minibatches, so gradients never
// vanish.
double loss_and_grad(const Problem& pr, const std::vector<float>& w, std::vector<float>* g,
                     int first = 0) {
  auto residual = [&](int i) {
    double s = -pr.y[i];
    const float* row = pr.a.data() + static_cast<size_t>(i) * kCols;
    for (int j = 0; j < kCols; ++j) s += static_cast<double>(row[j]) * w[j];
    return s;
  };
  if (g != nullptr) {
    std::vector<double> acc(kCols, 0.0);
    for (int b = 0; b < kBatch; ++b) {
      const int i = (first + b) % kRows;
      const double r = residual(i);
      const float* row = pr.a.data() + static_cast<size_t>(i) * kCols;
      for (int j = 0; j < kCols; ++j) acc[j] += row[j] * r;
    }
    for (int j = 0; j < kCols; ++j) (*g)[j] = static_cast<float>(acc[j] / kBatch);
    return 0.0;
  }
  double loss = 0;
  for (int i = 0; i < kRows; ++i) loss += 0.5 * residual(i) * residual(i) / kRows;
  return loss;
}

AdamWConfig config() {
  AdamWConfig cfg;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.999f;
  cfg.weight_decay = 0.0f;
  return cfg;
}
constexpr float kLr = 3e-2f;
// Linear decay to 0, so the last iterate settles and the final losses compare the optimizers, not
// the last minibatches' noise.
float lr_at(int t) { return kLr * static_cast<float>(kSteps - t + 1) / kSteps; }

// Final loss with fp32 states; *m_out, *v_out receive the final moments.
double train_fp32(const Problem& pr, std::vector<float>* m_out, std::vector<float>* v_out) {
  std::vector<float> w(kCols, 0.0f), g(kCols), m(kCols, 0.0f), v(kCols, 0.0f);
  for (int t = 1; t <= kSteps; ++t) {
    loss_and_grad(pr, w, &g, (t * 977) % kRows);
    cpu_adamw(w.data(), g.data(), DType::kF32, m.data(), v.data(), kCols,
              make_adamw_step(config(), lr_at(t), t, 1.0f, false), nullptr, DType::kF32);
  }
  *m_out = m;
  *v_out = v;
  return loss_and_grad(pr, w, nullptr);
}

double train_int8(const Problem& pr, StateCode code) {
  const Int8StateFormat f{256, code};
  const int64_t blocks = state_num_blocks(kCols, f.block);
  std::vector<float> w(kCols, 0.0f), g(kCols), ms(blocks, 0.0f), vs(blocks, 0.0f);
  std::vector<uint8_t> mc(kCols, 0), vc(kCols, 0);
  for (int t = 1; t <= kSteps; ++t) {
    loss_and_grad(pr, w, &g, (t * 977) % kRows);
    cpu_adamw_int8_states(
        w.data(), g.data(), DType::kF32, {mc.data(), ms.data()}, {vc.data(), vs.data()}, kCols, f,
        make_adamw_step(config(), lr_at(t), t, 1.0f, false), nullptr, DType::kF32);
  }
  return loss_and_grad(pr, w, nullptr);
}

double train_bf16(const Problem& pr) {
  std::vector<float> w(kCols, 0.0f), g(kCols);
  std::vector<uint16_t> m(kCols, 0), v(kCols, 0);
  for (int t = 1; t <= kSteps; ++t) {
    loss_and_grad(pr, w, &g, (t * 977) % kRows);
    cpu_adamw_bf16_states(w.data(), g.data(), DType::kF32, m.data(), v.data(), kCols,
                          make_adamw_step(config(), lr_at(t), t, 1.0f, false), nullptr,
                          DType::kF32);
  }
  return loss_and_grad(pr, w, nullptr);
}

// Relative RMS error sqrt(sum (x - x')^2 / sum x^2).
double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> round_trip(const std::vector<float>& x, StateCode code, bool is_signed) {
  const auto& book = state_code_book(code, is_signed);
  const int64_t n = static_cast<int64_t>(x.size()), block = 256;
  std::vector<uint8_t> c(n);
  std::vector<float> s(state_num_blocks(n, block)), y(n);
  quantize_state_blockwise(x.data(), n, block, book, c.data(), s.data());
  dequantize_state_blockwise(c.data(), s.data(), n, block, book, y.data());
  return y;
}

std::vector<float> update_of(const std::vector<float>& m, const std::vector<float>& v) {
  std::vector<float> u(m.size());
  for (size_t i = 0; i < m.size(); ++i) u[i] = m[i] / (std::sqrt(v[i]) + 1e-8f);
  return u;
}

TEST(StateAdamTracking, Int8TracksFp32OnLeastSquares) {
  const Problem pr = make_problem();
  const double initial = loss_and_grad(pr, std::vector<float>(kCols, 0.0f), nullptr);
  std::vector<float> m, v;
  const double f32 = train_fp32(pr, &m, &v);
  const double bf16 = train_bf16(pr);
  const double dyn = train_int8(pr, StateCode::kDynamic);
  const double lin = train_int8(pr, StateCode::kLinear);
  const double f8 = train_int8(pr, StateCode::kFloat8);
  std::printf("least squares %dx%d, batch %d, %d steps, lr %g: initial loss %.6g\n", kRows, kCols,
              kBatch, kSteps, kLr, initial);
  std::printf("%-16s %12s %10s\n", "states", "final loss", "vs fp32");
  for (auto [name, l] : {std::pair{"fp32", f32},
                         {"bf16", bf16},
                         {"int8 dynamic", dyn},
                         {"int8 linear", lin},
                         {"int8 float8", f8}}) {
    std::printf("%-16s %12.6g %+9.3f%%\n", name, l, 100.0 * (l - f32) / f32);
  }
  // [Note: state code book choice]: fp32 AdamW's final m and v through each book.
  const std::vector<float> u = update_of(m, v);
  std::printf("%-10s %12s %12s %14s\n", "book", "m rel rms", "v rel rms", "update rel rms");
  for (StateCode code : {StateCode::kDynamic, StateCode::kLinear, StateCode::kFloat8}) {
    const auto mq = round_trip(m, code, true), vq = round_trip(v, code, false);
    std::printf("%-10s %12.4g %12.4g %14.4g\n", state_code_name(code), rel_rms(m, mq),
                rel_rms(v, vq), rel_rms(u, update_of(mq, vq)));
  }
  EXPECT_LT(f32, 0.05 * initial);  // the fit makes progress: the comparison means something
  // Measured (this seed): bf16 -0.26%, int8 dynamic -1.65%, float8 -1.41%; asserted with 2x
  // margins. Linear codes round the small v of a block up to absmax/255 (never to 0: that made
  // m / eps steps and the fit diverged, 2e5x), and the fit stalls at 37x fp32's loss.
  EXPECT_LE(std::fabs(bf16 - f32) / f32, 0.006);
  EXPECT_LE(std::fabs(dyn - f32) / f32, 0.035);
  EXPECT_LE(std::fabs(f8 - f32) / f32, 0.03);
  EXPECT_GT(lin, 10.0 * f32);
}

}  // namespace
}  // namespace zs::optim
