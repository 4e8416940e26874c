// The GEMM rate of each input dtype on this process's paths ([Note: GEMM paths] in nn/gemm.h),
// measured at one shape: which of fp32 and bf16 products is faster on this CPU. On CPUs with
// AVX-512 BF16 but no AMX, oneDNN's bf16 matmul can run at half its fp32 rate; on AVX2 CPUs bf16
// operands are widened to fp32 first. A trainer says so when the dtype it was given is the slower.
#pragma once

#include <cstdint>
#include <string>

namespace zs::nn {

struct GemmRates {
  int64_t m = 0, k = 0, n = 0;  // the product: [m, k] x [k, n], fp32 output
  int threads = 0;              // the OpenMP team it ran on
  double fp32_gflops = 0.0;     // best over the repetitions
  double bf16_gflops = 0.0;
};

// Runs C = A B at [m, k] x [k, n] with fp32 and with bf16 inputs on the calling thread's OpenMP
// team, alternating the two, after one warm-up run each, until both have run `min_reps` times and
// `seconds` have passed (at most 64 times each); reports each dtype's best rate. Allocates the
// operands (4 (mk + kn + mn) bytes, plus their bf16 copies) for the duration of the call. Throws
// zs::Error(kInvalidArgument) for a non-positive dimension.
GemmRates measure_gemm_rates(int64_t m, int64_t k, int64_t n, double seconds = 0.05,
                             int min_reps = 3);

// One line for a user who chose `chosen` ("fp32" or "bf16"; any other is not compared):
// "gemm rates here ([1024 x 256] x [256 x 688], 2 threads): fp32 281.3 GFLOP/s, bf16 156.0" and,
// when the chosen dtype's rate is below the other's by more than `margin` (a fraction), the
// advice ": bf16 products are 1.80x slower than fp32 on this CPU; --dtype fp32 trains faster
// here". No trailing newline.
std::string describe_gemm_rates(const GemmRates& r, const std::string& chosen,
                                double margin = 0.15);

// True when `chosen` ("fp32" or "bf16") is slower than the other dtype by more than `margin`.
bool slower_dtype(const GemmRates& r, const std::string& chosen, double margin = 0.15);

}  // namespace zs::nn
