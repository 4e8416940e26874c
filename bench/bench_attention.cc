// bench_attention: the causal attention's two CPU paths, the GEMM attention (nn/attention.h) and
// the fused kernel (nn/flash_attention.h), forward and backward at one shape, fp32 mm.
//   bench_attention B T H KV hd threads [iterations]
// Prints ns per call of each (2 warm-up calls excluded): the median wall time and the least CPU
// time.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <utility>
#include <vector>

#include "nn/attention.h"
#include "nn/flash_attention.h"
#include "nn/threads.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e9 * static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec);
}

// The median wall time of a call and the least CPU time of the process's threads over the calls
// (on a shared machine the least disturbed call; at one thread the call's own time).
template <typename F>
std::pair<double, double> median_ns(int iters, F&& f) {
  std::vector<double> t, c;
  for (int i = 0; i < iters + 2; ++i) {
    const auto a = Clock::now();
    const double c0 = cpu_ns();
    f();
    const double cpu = cpu_ns() - c0;
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - a).count();
    if (i >= 2) t.push_back(ns), c.push_back(cpu);
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  return {t[t.size() / 2], c[0]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: bench_attention B T H KV hd threads [iterations]\n");
    return 2;
  }
  const int B = std::atoi(argv[1]), T = std::atoi(argv[2]), H = std::atoi(argv[3]),
            KV = std::atoi(argv[4]), hd = std::atoi(argv[5]), threads = std::atoi(argv[6]);
  const int iters = argc > 7 ? std::atoi(argv[7]) : 20;
  const int D = H * hd, Q = D + 2 * KV * hd;
  const int64_t M = static_cast<int64_t>(B) * T, bhtt = static_cast<int64_t>(B) * H * T * T;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> qkv(M * Q), dout(M * D), out(M * D), dqkv(M * Q);
  for (float& x : qkv) x = nd(rng);
  for (float& x : dout) x = nd(rng);
  zs::nn::ThreadScope scope(threads);

  zs::nn::Attention attn(B, T, D, H, KV, zs::DType::kF32, nullptr);
  std::vector<float> q(M * D), k(M * D), v(M * D), p(bhtt), s(bhtt), o(M * D), dom(M * D),
      dq(M * D), dk(M * D), dv(M * D);
  zs::nn::AttentionActs acts{q.data(), k.data(), v.data(), p.data(), p.data()};
  zs::nn::AttentionWork work{s.data(),  o.data(),  dom.data(), nullptr,
                             dq.data(), dk.data(), dv.data()};
  const auto gf = median_ns(iters, [&] { attn.forward(qkv.data(), acts, work, out.data()); });
  const auto gb = median_ns(iters, [&] { attn.backward(dout.data(), acts, work, dqkv.data()); });

  zs::nn::FlashAttention fa(B, T, D, H, KV, zs::DType::kF32, threads);
  std::vector<float> fq(M * D), fk(M * KV * hd), fv(M * KV * hd),
      lse(static_cast<int64_t>(B) * H * T);
  std::vector<float> tiles(zs::nn::FlashAttention::tiles_bytes(hd, threads) / 4 + 16);
  float* t = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(tiles.data()) + 63) / 64 * 64);
  const int64_t nt = static_cast<int64_t>(B) * KV * hd * zs::nn::FlashAttention::padded_context(T);
  std::vector<float> fkt(nt), fvt(nt);
  zs::nn::FlashAttentionActs fac{fq.data(),  fk.data(),  fv.data(),
                                 fkt.data(), fvt.data(), lse.data()};
  const auto ff = median_ns(iters, [&] { fa.forward(qkv.data(), fac, t, out.data()); });
  const auto fb =
      median_ns(iters, [&] { fa.backward(dout.data(), fac, out.data(), t, dqkv.data()); });
  std::printf("B %d T %d H %d KV %d hd %d threads %d (ns per call, median wall / least cpu)\n", B,
              T, H, KV, hd, threads);
  std::printf("  gemm   fwd %10.0f / %10.0f  bwd %10.0f / %10.0f  sum %10.0f / %10.0f\n", gf.first,
              gf.second, gb.first, gb.second, gf.first + gb.first, gf.second + gb.second);
  std::printf("  fused  fwd %10.0f / %10.0f  bwd %10.0f / %10.0f  sum %10.0f / %10.0f\n", ff.first,
              ff.second, fb.first, fb.second, ff.first + fb.first, ff.second + fb.second);
  std::printf("  fused / gemm: wall %.2f, cpu %.2f\n",
              (ff.first + fb.first) / (gf.first + gb.first),
              (ff.second + fb.second) / (gf.second + gb.second));
  return 0;
}
