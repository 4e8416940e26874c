#include "nn/gemm_rate.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "core/convert.h"
#include "core/error.h"
#include "nn/gemm.h"

namespace zs::nn {

GemmRates measure_gemm_rates(int64_t m, int64_t k, int64_t n, double seconds, int min_reps) {
  ZS_CHECK(m > 0 && k > 0 && n > 0, ErrorCode::kInvalidArgument,
           "measure_gemm_rates: shape [{} x {}] x [{} x {}] has a non-positive dimension", m, k, k,
           n);
  using Clock = std::chrono::steady_clock;
  const size_t mk = static_cast<size_t>(m * k), kn = static_cast<size_t>(k * n);
  std::vector<float> a(mk), b(kn), c(static_cast<size_t>(m * n));
  // Values of either sign and magnitude near 1 (denormals or zeros would flatter a kernel).
  for (size_t i = 0; i < mk; ++i) a[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 7.0f;
  for (size_t i = 0; i < kn; ++i) b[i] = static_cast<float>(static_cast<int>(i % 11) - 5) / 9.0f;
  std::vector<uint16_t> a16(mk), b16(kn);
  convert(a.data(), DType::kF32, a16.data(), DType::kBF16, mk);
  convert(b.data(), DType::kF32, b16.data(), DType::kBF16, kn);
  GemmDesc d;
  d.m = m;
  d.k = k;
  d.n = n;
  d.dtype = DType::kF32;
  Gemm g32(d, nullptr);
  d.dtype = DType::kBF16;
  Gemm g16(d, nullptr);
  auto time_one = [&](Gemm& g, const void* pa, const void* pb) {
    const auto t0 = Clock::now();
    g.run(pa, pb, c.data());
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  time_one(g32, a.data(), b.data());  // warm-up: first-touch, the library's caches
  time_one(g16, a16.data(), b16.data());
  double best32 = 1e30, best16 = 1e30;
  const auto start = Clock::now();
  for (int rep = 0; rep < 64; ++rep) {
    best32 = std::min(best32, time_one(g32, a.data(), b.data()));
    best16 = std::min(best16, time_one(g16, a16.data(), b16.data()));
    if (rep + 1 >= min_reps &&
        std::chrono::duration<double>(Clock::now() - start).count() >= seconds)
      break;
  }
  GemmRates r;
  r.m = m;
  r.k = k;
  r.n = n;
  r.threads = omp_get_max_threads();
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  r.fp32_gflops = flops / best32 / 1e9;
  r.bf16_gflops = flops / best16 / 1e9;
  return r;
}

bool slower_dtype(const GemmRates& r, const std::string& chosen, double margin) {
  if (chosen == "bf16") return r.bf16_gflops < r.fp32_gflops * (1.0 - margin);
  if (chosen == "fp32") return r.fp32_gflops < r.bf16_gflops * (1.0 - margin);
  return false;
}

std::string describe_gemm_rates(const GemmRates& r, const std::string& chosen, double margin) {
  std::string s = fmt::format(
      "gemm rates here ([{} x {}] x [{} x {}], {} thread{}): fp32 {:.1f} GFLOP/s, bf16 {:.1f}", r.m,
      r.k, r.k, r.n, r.threads, r.threads == 1 ? "" : "s", r.fp32_gflops, r.bf16_gflops);
  if (!slower_dtype(r, chosen, margin)) return s;
  const bool bf16 = chosen == "bf16";
  const double ratio = bf16 ? r.fp32_gflops / r.bf16_gflops : r.bf16_gflops / r.fp32_gflops;
  s += fmt::format(
      ": {} products are {:.2f}x slower than {} on this CPU; --dtype {} trains "
      "faster here",
      chosen, ratio, bf16 ? "fp32" : "bf16", bf16 ? "fp32" : "bf16");
  if (bf16) s += " (bf16 halves the parameter and activation bytes)";
  return s;
}

}  // namespace zs::nn
