// bench_gemm: GFLOP/s of the GEMM shapes of the default GPT (M = 1024 tokens, C = 256) through
// nn::Gemm, fp32 and bf16, at the current OMP thread count. Median of N runs after warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nn/gemm.h"
#include "nn/threads.h"

using namespace zs;
using namespace zs::nn;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  ThreadScope scope(threads);
  struct S {
    const char* name;
    GemmDesc d;
  };
  auto mk = [](int64_t b, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc) {
    GemmDesc d;
    d.batch = b;
    d.m = m;
    d.n = n;
    d.k = k;
    d.trans_a = ta;
    d.trans_b = tb;
    d.accumulate = acc;
    return d;
  };
  std::vector<S> shapes = {
      {"square   2048^3", mk(1, 2048, 2048, 2048, false, false, false)},
      {"qkv fwd  2048x768x256", mk(1, 2048, 768, 256, false, true, false)},
      {"qkv fwd  1024x768x256", mk(1, 1024, 768, 256, false, true, false)},
      {"fc fwd   1024x1024x256", mk(1, 1024, 1024, 256, false, true, false)},
      {"fcp fwd  1024x256x1024", mk(1, 1024, 256, 1024, false, true, true)},
      {"fc dx    1024x256x1024", mk(1, 1024, 256, 1024, false, false, false)},
      {"fc dW    1024x256x1024^T", mk(1, 1024, 256, 1024, true, false, true)},
      {"qkv dW   768x256x1024^T", mk(1, 768, 256, 1024, true, false, true)},
      {"attn QK  32x128x128x64", mk(32, 128, 128, 64, false, true, false)},
      {"attn PV  32x128x64x128", mk(32, 128, 64, 128, false, false, false)},
      {"attn dV  32x128x64x128^T", mk(32, 128, 64, 128, true, false, false)},
  };
  std::vector<float> a(32 * 1024 * 1024, 0.01f), b(32 * 1024 * 1024, 0.02f),
      c(32 * 1024 * 1024, 0.0f);
  std::printf("threads %d\n%-28s %10s %10s\n", threads, "shape", "fp32 GF/s", "bf16 GF/s");
  for (auto& s : shapes) {
    double gf[2];
    int k = 0;
    for (DType dt : {DType::kF32, DType::kBF16}) {
      s.d.dtype = dt;
      Gemm g(s.d, nullptr);
      std::vector<double> t;
      for (int i = 0; i < 30; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        g.run(a.data(), b.data(), c.data());
        auto t1 = std::chrono::steady_clock::now();
        if (i >= 5) t.push_back(std::chrono::duration<double>(t1 - t0).count());
      }
      std::sort(t.begin(), t.end());
      gf[k++] = g.flops() / t[t.size() / 2] / 1e9;
    }
    std::printf("%-28s %10.1f %10.1f\n", s.name, gf[0], gf[1]);
  }
  return 0;
}
