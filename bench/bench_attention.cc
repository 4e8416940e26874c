// bench_attention: the causal attention's two CPU paths, the GEMM attention (nn/attention.h) and
// the fused kernel (nn/flash_attention.h), forward and backward at one shape, fp32 mm.
//   bench_attention B T H KV hd threads [iterations]
// Prints the median ns per call of each (2 warm-up calls excluded).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "nn/attention.h"
#include "nn/flash_attention.h"
#include "nn/threads.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_ns(int iters, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    const auto a = Clock::now();
    f();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - a).count();
    if (i >= 2) t.push_back(ns);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
  const double gf = median_ns(iters, [&] { attn.forward(qkv.data(), acts, work, out.data()); });
  const double gb = median_ns(iters, [&] { attn.backward(dout.data(), acts, work, dqkv.data()); });

  zs::nn::FlashAttention fa(B, T, D, H, KV, zs::DType::kF32, threads);
  std::vector<float> fq(M * D), fk(M * KV * hd), fv(M * KV * hd),
      lse(static_cast<int64_t>(B) * H * T);
  std::vector<float> tiles(zs::nn::FlashAttention::tiles_bytes(hd, threads) / 4 + 16);
  float* t = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(tiles.data()) + 63) / 64 * 64);
  zs::nn::FlashAttentionActs fac{fq.data(), fk.data(), fv.data(), lse.data()};
  const double ff = median_ns(iters, [&] { fa.forward(qkv.data(), fac, t, out.data()); });
  const double fb =
      median_ns(iters, [&] { fa.backward(dout.data(), fac, out.data(), t, dqkv.data()); });
  std::printf(
      "B %d T %d H %d KV %d hd %d threads %d: gemm fwd %.0f bwd %.0f (sum %.0f) ns; "
      "fused fwd %.0f bwd %.0f (sum %.0f) ns; fused/gemm %.2f\n",
      B, T, H, KV, hd, threads, gf, gb, gf + gb, ff, fb, ff + fb, (ff + fb) / (gf + gb));
  return 0;
}
