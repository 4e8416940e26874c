// The chunked LM head (nn/lm_head.h, [Note: chunked head]) against the unchunked one (one chunk of
// M rows, which is itself checked op for op against the head the model ran before: Linear,
// cross_entropy_forward, cross_entropy_backward). Where the GEMM gives a row the same bits
// whatever the rows around it (oneDNN's AVX-512 kernels, native fp32 and bf16): loss, row losses,
// inference logits and dx bit for bit. Elsewhere (oneDNN's AVX2 gemm:jit, Eigen) a row's logits
// differ by rounding, and each is held to the bound derived below. dW within the note's bound
// (plus, off the exact paths, what the dlogits' difference carries). fp32 and bf16 operands,
// chunks that divide M and chunks that do not, V not a multiple of the vector width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"
#include "nn/gemm.h"
#include "nn/kernels.h"
#include "nn/linear.h"
#include "nn/lm_head.h"
#include "nn/threads.h"

namespace zs::nn {
namespace {

struct Shape {
  int64_t M;
  int C, V;
};

// One problem: x [M, C] and W [V, C] in mm (and their fp32 values), targets, a starting dW.
struct Problem {
  Shape s;
  DType mm;
  std::vector<float> x32, w32, dw0;
  std::vector<uint8_t> x, w;  // in mm
  std::vector<int32_t> targets;

  Problem(Shape shape, DType dt, uint32_t seed) : s(shape), mm(dt) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    x32.resize(static_cast<size_t>(s.M * s.C));
    w32.resize(static_cast<size_t>(int64_t{s.V} * s.C));
    dw0.resize(w32.size());
    for (float& v : x32) v = nd(rng);
    for (float& v : w32) v = 0.3f * nd(rng);
    for (float& v : dw0) v = 1e-3f * nd(rng);
    x = in_mm(x32);
    w = in_mm(w32);
    std::uniform_int_distribution<int> t(0, s.V - 1);
    targets.resize(static_cast<size_t>(s.M));
    for (int32_t& v : targets) v = t(rng);
  }
  // v stored in mm; v itself becomes the stored values (exact in fp32).
  std::vector<uint8_t> in_mm(std::vector<float>& v) const {
    std::vector<uint8_t> out(v.size() * dtype_size(mm));
    store_as(v.data(), out.data(), mm, 0, static_cast<int64_t>(v.size()));
    if (mm == DType::kBF16)
      for (size_t i = 0; i < v.size(); ++i) {
        uint32_t bits = uint32_t{reinterpret_cast<const uint16_t*>(out.data())[i]} << 16;
        std::memcpy(&v[i], &bits, 4);
      }
    return out;
  }
};

// What one head computes for a problem.
struct Result {
  double loss = 0.0;
  std::vector<float> row_loss, dx, dw, dl;  // dl: the last backward's dlogits (one chunk: all)
  std::vector<std::vector<float>> row_logits;
};

const int64_t kRows[] = {0, 5, 36};  // rows whose inference logits are compared

Result run_head(const Problem& p, int64_t chunk, bool train_dw = true) {
  MemoryTracker t;
  LmHead head(p.s.M, p.s.C, p.s.V, chunk, p.mm, &t);
  std::vector<float> logits(static_cast<size_t>(chunk * p.s.V));
  std::vector<uint8_t> dl_mm(logits.size() * dtype_size(p.mm));
  Result r;
  r.row_loss.assign(static_cast<size_t>(p.s.M), -1.0f);
  r.dx.assign(static_cast<size_t>(p.s.M * p.s.C), 7.0f);
  r.dw = p.dw0;
  r.loss = head.forward(p.x.data(), p.w.data(), p.targets.data(), logits.data(), r.row_loss.data());
  const std::vector<float> forward_row_loss = r.row_loss;
  head.backward(p.x.data(), p.w.data(), p.targets.data(), 1.0f, logits.data(), dl_mm.data(),
                r.row_loss.data(), r.dx.data(), train_dw ? r.dw.data() : nullptr);
  EXPECT_EQ(0, std::memcmp(forward_row_loss.data(), r.row_loss.data(), 4 * r.row_loss.size()))
      << "backward rewrote the row losses with other values";
  r.dl = logits;
  for (int64_t row : kRows) {
    std::vector<float> out(static_cast<size_t>(p.s.V));
    head.row_logits(p.x.data(), p.w.data(), std::min(row, p.s.M - 1), logits.data(), out.data());
    r.row_logits.push_back(out);
  }
  return r;
}

// True where a row's product bits do not depend on the other rows: oneDNN's brgemm AVX-512 kernels
// (not widened). The AVX2 twin of this test (gemm:jit) and Eigen builds run the bounded checks.
bool rows_exact(DType mm) {
  const GemmPath& g = gemm_path(mm);
  return gemm_uses_onednn() && !g.widened && g.name.find("brg:avx512") != std::string::npos;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

// The bound of [Note: chunked head]: 2 g(M + 1) (|dW0| + sum_i |dl_i| |x_i|) per element, plus
// M + 1 times the smallest normal for the kernels that flush subnormals (vdpbf16ps).
std::vector<double> dw_bound(const Problem& p, const std::vector<float>& dl) {
  const int64_t M = p.s.M, C = p.s.C, V = p.s.V;
  const double u = std::ldexp(1.0, -24), n = static_cast<double>(M + 1);
  const double g = n * u / (1.0 - n * u);
  std::vector<double> b(static_cast<size_t>(V * C));
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) {
      double s = std::fabs(p.dw0[v * C + c]);
      for (int64_t i = 0; i < M; ++i) s += std::fabs(dl[i * V + v]) * std::fabs(p.x32[i * C + c]);
      b[v * C + c] = 2.0 * g * s + n * 1.2e-38;
    }
  return b;
}

// dlogits as the GEMM saw them: the fp32 values rounded to mm.
std::vector<float> as_mm_values(const Problem& p, std::vector<float> v) {
  (void)p.in_mm(v);
  return v;
}

// Off the exact paths: per row i, D_i bounds the difference of any two fp32 products of its
// logits, 2 g(C) max_v sum_c |x_ic| |w_vc| (each within g(C) of the exact dot product). Then the
// row loss, lse(z) - z_t, moves by at most 2 D_i, plus its kernel's own rounding (1e-6 relative
// covers exp_approx and the sums over V); a probability by at most p (2.02 D_i + 1e-6), so dx_ic by
// k max_v |w_vc| (2.02 D_i + 1e-6 + 4 g(V)) (sum_v p = 1, sum_v |dl| <= 2k), plus with bf16
// dlogits their rounding, 2^-7 k max_v |w_vc|.
struct RowBounds {
  std::vector<double> D;         // [M]
  std::vector<double> row_loss;  // [M]
  std::vector<double> dx;        // [M, C]
  std::vector<double> dw_extra;  // [V, C]: sum_i |delta dl_iv| |x_ic|
};

double g_of(double n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1.0 - n * u);
}

RowBounds row_bounds(const Problem& p, const Result& whole, const std::vector<float>& dl) {
  const int64_t M = p.s.M, C = p.s.C, V = p.s.V;
  const double k = 1.0 / static_cast<double>(M), lowp = p.mm == DType::kBF16 ? 1.0 : 0.0;
  RowBounds b;
  b.D.resize(M);
  std::vector<double> wmax(C, 0.0);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c)
      wmax[c] = std::max(wmax[c], std::fabs(static_cast<double>(p.w32[v * C + c])));
  for (int64_t i = 0; i < M; ++i) {
    double mx = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c)
        s += std::fabs(p.x32[i * C + c]) * std::fabs(p.w32[v * C + c]);
      mx = std::max(mx, s);
    }
    b.D[i] = 2.0 * g_of(static_cast<double>(C)) * mx;
    b.row_loss.push_back(2.0 * b.D[i] + 1e-6 * (1.0 + std::fabs(whole.row_loss[i])));
    for (int64_t c = 0; c < C; ++c)
      b.dx.push_back(
          k * wmax[c] *
          (2.02 * b.D[i] + 1e-6 + 4.0 * g_of(static_cast<double>(V)) + lowp * std::ldexp(1.0, -7)));
  }
  b.dw_extra.assign(static_cast<size_t>(V * C), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t v = 0; v < V; ++v) {
      const double prob = dl[i * V + v] / k + (v == p.targets[i] ? 1.0 : 0.0);
      const double d = k * std::fabs(prob) * (2.02 * b.D[i] + 1e-6) +
                       lowp * std::ldexp(1.0, -7) * std::fabs(dl[i * V + v]);
      for (int64_t c = 0; c < C; ++c) b.dw_extra[v * C + c] += d * std::fabs(p.x32[i * C + c]);
    }
  return b;
}

// Elements of a past b (bound) beyond `slack` times the bound; and the worst ratio.
int64_t past(const std::vector<float>& a, const std::vector<float>& ref,
             const std::vector<double>& bound, double* worst) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - ref[i]);
    n += d > bound[i];
    *worst = std::max(*worst, d / bound[i]);
  }
  return n;
}

TEST(LmHead, OneChunkIsThePreviousHead) {
  ThreadScope scope(2);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const Problem p({74, 64, 301}, dt, 3);
    const Result r = run_head(p, p.s.M);
    // The model's head before chunking: Linear, cross_entropy_forward, backward in place.
    MemoryTracker t;
    Linear lin(p.s.M, p.s.C, p.s.V, false, false, dt, &t);
    std::vector<float> logits(static_cast<size_t>(p.s.M * p.s.V)), row_loss(p.s.M);
    std::vector<float> dx(static_cast<size_t>(p.s.M * p.s.C)), dw = p.dw0;
    lin.forward(p.x.data(), p.w.data(), nullptr, logits.data());
    const double loss = cross_entropy_forward(logits.data(), p.targets.data(), p.s.M, p.s.V,
                                              logits.data(), row_loss.data());
    cross_entropy_backward(logits.data(), p.targets.data(), p.s.M, p.s.V, 1.0f, logits.data());
    std::vector<uint8_t> dl(logits.size() * dtype_size(dt));
    store_as(logits.data(), dl.data(), dt, 0, static_cast<int64_t>(logits.size()));
    lin.backward(dt == DType::kF32 ? static_cast<const void*>(logits.data()) : dl.data(),
                 p.x.data(), p.w.data(), dx.data(), dw.data());
    EXPECT_EQ(loss, r.loss) << dtype_name(dt);
    EXPECT_TRUE(same_bits(row_loss, r.row_loss)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(dx, r.dx)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(dw, r.dw)) << dtype_name(dt);
  }
}

// Loss, row losses, inference logits and dx bit for bit on the exact paths, within RowBounds
// elsewhere; dW within the bound; a frozen weight (dw null) changes nothing else.
TEST(LmHead, ChunksGiveTheSameLossAndDxAndBoundedDw) {
  ThreadScope scope(2);
  const Shape shapes[] = {{74, 64, 301}, {150, 256, 1000}};
  for (const Shape& s : shapes)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const Problem p(s, dt, static_cast<uint32_t>(s.M + s.V));
      const Result whole = run_head(p, s.M);
      const std::vector<float> dl = as_mm_values(p, whole.dl);
      std::vector<double> bound = dw_bound(p, dl);
      const bool exact = rows_exact(dt);
      std::printf("%s products on %s: %s\n", std::string(dtype_name(dt)).c_str(),
                  gemm_path(dt).name.c_str(), exact ? "rows exact" : "rows bounded");
      RowBounds rb;
      if (!exact) {
        rb = row_bounds(p, whole, dl);
        for (size_t i = 0; i < bound.size(); ++i) bound[i] += rb.dw_extra[i];
      }
      for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{37}, s.M - 1}) {
        SCOPED_TRACE(::testing::Message() << "M " << s.M << " C " << s.C << " V " << s.V << " "
                                          << dtype_name(dt) << " chunk " << chunk);
        const Result r = run_head(p, chunk);
        if (exact) {
          EXPECT_EQ(r.loss, whole.loss);
          EXPECT_TRUE(same_bits(r.row_loss, whole.row_loss));
          EXPECT_TRUE(same_bits(r.dx, whole.dx));
          for (size_t i = 0; i < std::size(kRows); ++i)
            EXPECT_TRUE(same_bits(r.row_logits[i], whole.row_logits[i])) << "row " << kRows[i];
        } else {
          double w_loss = 0.0, w_dx = 0.0, mean_bound = 0.0;
          for (double x : rb.row_loss) mean_bound += x / static_cast<double>(s.M);
          EXPECT_EQ(past(r.row_loss, whole.row_loss, rb.row_loss, &w_loss), 0) << "row losses";
          EXPECT_LE(std::fabs(r.loss - whole.loss), mean_bound + 1e-12);
          EXPECT_EQ(past(r.dx, whole.dx, rb.dx, &w_dx), 0) << "dx";
          for (size_t i = 0; i < std::size(kRows); ++i) {
            const int64_t row = std::min(kRows[i], s.M - 1);
            for (int v = 0; v < s.V; ++v)
              EXPECT_LE(std::fabs(r.row_logits[i][v] - whole.row_logits[i][v]), rb.D[row]);
          }
          std::printf("  chunk %3ld: row losses worst %.3g, dx worst %.3g of their bounds\n",
                      static_cast<long>(chunk), w_loss, w_dx);
        }
        double worst = 0.0, max_diff = 0.0;
        int64_t over = 0, differ = 0;
        for (size_t i = 0; i < r.dw.size(); ++i) {
          const double d = std::fabs(static_cast<double>(r.dw[i]) - whole.dw[i]);
          over += d > bound[i];
          differ += d != 0.0;
          worst = std::max(worst, d / bound[i]);
          max_diff = std::max(max_diff, d);
        }
        EXPECT_EQ(over, 0) << "dW elements past the bound";
        std::printf(
            "M %ld C %d V %d %s chunk %3ld: dW max |diff| %.3g, %ld of %zu differ, worst "
            "%.3g of the bound\n",
            static_cast<long>(s.M), s.C, s.V, std::string(dtype_name(dt)).c_str(),
            static_cast<long>(chunk), max_diff, static_cast<long>(differ), r.dw.size(), worst);
        const Result frozen = run_head(p, chunk, false);
        EXPECT_TRUE(same_bits(frozen.dx, r.dx));
        EXPECT_TRUE(same_bits(frozen.dw, p.dw0));
      }
    }
}

TEST(LmHead, LinearRowsAndBadChunks) {
  EXPECT_EQ(LmHead::linear_rows(74, 74), std::vector<int64_t>({74}));
  EXPECT_EQ(LmHead::linear_rows(74, 37), std::vector<int64_t>({37}));
  EXPECT_EQ(LmHead::linear_rows(74, 16), std::vector<int64_t>({16, 10}));
  MemoryTracker t;
  EXPECT_EQ(LmHead(74, 8, 10, 16, DType::kF32, &t).num_chunks(), 5);
  EXPECT_THROW(LmHead(74, 8, 10, 0, DType::kF32, &t), Error);
  EXPECT_THROW(LmHead(74, 8, 10, 75, DType::kF32, &t), Error);
}

}  // namespace
}  // namespace zs::nn
