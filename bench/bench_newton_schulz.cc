// bench_newton_schulz: Muon's Newton-Schulz (optim/newton_schulz.h) per matrix shape, and its
// fixed-order products beside oneDNN's fp32 matmul (nn::Gemm) of the same shapes in the same run.
//
// Method: for each shape r x c (r <= c, as Newton-Schulz orients it), one iteration is three
// products: X X^T (r x c . c x r), A A (r x r . r x r), B X (r x r . r x c), 4 r^2 c + 2 r^3 FLOPs.
// Each implementation runs 2 untimed iterations, then `iters` timed ones; the table shows the
// median. "ns5" is the whole newton_schulz() call with 5 iterations (norm, transposes,
// element-wise steps included).
//
// Usage: bench_newton_schulz [threads] [iters] [RxC ...]   (default: 1 thread, 7 iterations, the
// default zs_train model's matrices and GPT-2 small's)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nn/gemm.h"
#include "optim/newton_schulz.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_s(int iters, F&& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int i = 3; i < argc; ++i) {
    long r = 0, c = 0;
    if (std::sscanf(argv[i], "%ldx%ld", &r, &c) == 2) shapes.emplace_back(r, c);
  }
  if (shapes.empty()) shapes = {{128, 128}, {128, 384}, {128, 512}, {768, 768}, {768, 3072}};
  omp_set_num_threads(threads);
  std::printf(
      "threads %d, median of %d | per Newton-Schulz iteration (3 products) | ns5 = the "
      "whole call, 5 iterations\n",
      threads, iters);
  std::printf("%-10s %12s %10s %12s %10s %10s %12s\n", "shape", "fixed ms", "GFLOP/s", "onednn ms",
              "GFLOP/s", "ratio", "ns5 ms");
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [r0, c0] : shapes) {
    const int64_t r = std::min(r0, c0), c = std::max(r0, c0);
    std::vector<float> x(static_cast<size_t>(r * c)), xt(x.size()), y(x.size());
    std::vector<float> a(static_cast<size_t>(r * r)), aa(a.size());
    for (float& v : x) v = u(gen) * 0.01f;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) xt[j * r + i] = x[i * c + j];
    for (float& v : a) v = u(gen) * 0.01f;
    const double flops = 4.0 * r * r * c + 2.0 * r * r * r;
    const double fixed = median_s(iters, [&] {
      zs::optim::matmul_fixed_order(x.data(), xt.data(), a.data(), r, c, r, threads);
      zs::optim::matmul_fixed_order(a.data(), a.data(), aa.data(), r, r, r, threads);
      zs::optim::matmul_fixed_order(aa.data(), x.data(), y.data(), r, r, c, threads);
    });
    zs::nn::GemmDesc d1, d2, d3;
    d1.m = r, d1.k = c, d1.n = r;
    d2.m = r, d2.k = r, d2.n = r;
    d3.m = r, d3.k = r, d3.n = c;
    zs::MemoryTracker tracker;
    zs::nn::Gemm g1(d1, &tracker), g2(d2, &tracker), g3(d3, &tracker);
    const double dnn = median_s(iters, [&] {
      g1.run(x.data(), xt.data(), a.data());
      g2.run(a.data(), a.data(), aa.data());
      g3.run(aa.data(), x.data(), y.data());
    });
    std::vector<float> ws(static_cast<size_t>(zs::optim::newton_schulz_workspace(r, c)));
    std::vector<float> out(x.size());
    const double ns5 = median_s(iters, [&] {
      zs::optim::newton_schulz(x.data(), r, c, 5, out.data(), ws.data(), threads);
    });
    const std::string name = std::to_string(r0) + "x" + std::to_string(c0);
    std::printf("%-10s %12.3f %10.1f %12.3f %10.1f %10.2f %12.3f\n", name.c_str(), fixed * 1e3,
                flops / fixed * 1e-9, dnn * 1e3, flops / dnn * 1e-9, fixed / dnn, ns5 * 1e3);
  }
  return 0;
}
