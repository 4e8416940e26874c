// bench_int8_linear: nn::Int8Linear ([Note: int8 linear] in nn/int8_linear.h) on the GPT's four
// linear shapes, forward and backward-data, on its two paths: dequantize (W dequantized to bf16
// in the call, then nn::Linear's bf16 product) and int8 GEMM (activation quantization per row,
// oneDNN s8 x s8 -> s32, rescale; forward also with the outlier threshold 6, which here finds no
// column: it times the column-max pass). x and dy bf16 normal(0, 1), W GPT-2's init quantized.
//
// Usage: bench_int8_linear [threads=1] [width=128] [tokens=2048] [repetitions=25]. Each figure is
// the median of the repetitions after 3 warm-up runs, the five variants interleaved.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/quantize.h"
#include "nn/int8_linear.h"
#include "nn/threads.h"

using namespace zs;
using namespace zs::nn;

namespace {
using Clock = std::chrono::steady_clock;
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int64_t C = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t M = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int reps = argc > 4 ? std::max(1, std::atoi(argv[4])) : 25;
  ThreadScope scope(threads);
  std::printf("cpu: %s [%s]\n%s\nthreads %d, M %lld, median of %d (ms)\n", cpu_model_name().c_str(),
              cpu_features_string().c_str(), int8_gemm_description().c_str(), threads,
              static_cast<long long>(M), reps);
  std::printf("%-8s %5s %5s | %8s %8s %8s %6s | %8s %8s %6s\n", "linear", "in", "out", "fwd deq",
              "fwd i8", "i8 t=6", "deq/i8", "bwd deq", "bwd i8", "deq/i8");
  const struct {
    const char* name;
    int64_t in, out;
  } shapes[] = {{"qkv", C, 3 * C}, {"proj", C, C}, {"fc", C, 4 * C}, {"fc_proj", 4 * C, C}};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (const auto& s : shapes) {
    std::vector<float> x(M * std::max(s.in, s.out)), w(s.out * s.in);
    for (float& v : x) v = nd(rng);
    for (float& v : w) v = 0.02f * nd(rng);
    std::vector<uint16_t> x16(x.size());
    fp32_to_bf16(x.data(), x16.data(), x.size());
    std::vector<int8_t> q(w.size());
    std::vector<float> sw(s.out), y(M * s.out), dx(M * s.in), b(s.out, 0.0f);
    quantize_int8_rows(w.data(), s.out, s.in, q.data(), sw.data());
    GemmWorkspace gws, iws;
    Int8LinearDesc d;
    d.M = M;
    d.in = s.in;
    d.out = s.out;
    d.bias = true;
    d.mm = DType::kBF16;
    d.path = Int8Path::kDequantize;
    Int8Linear deq(d, nullptr, &gws, &iws);
    d.path = Int8Path::kInt8Gemm;
    d.backward = Int8Backward::kInt8Gemm;
    Int8Linear i8(d, nullptr, &gws, &iws);
    d.outlier_threshold = 6.0f;
    Int8Linear i8t(d, nullptr, &gws, &iws);
    const Int8Weight wt{q.data(), sw.data()};
    std::vector<double> t[5];
    for (int it = 0; it < reps + 3; ++it) {
      double v[5];
      auto time = [&](auto&& f) {
        const auto t0 = Clock::now();
        f();
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      };
      v[0] = time([&] { deq.forward(x16.data(), wt, b.data(), y.data()); });
      v[1] = time([&] { i8.forward(x16.data(), wt, b.data(), y.data()); });
      v[2] = time([&] { i8t.forward(x16.data(), wt, b.data(), y.data()); });
      v[3] = time([&] { deq.backward_data(x16.data(), wt, dx.data()); });
      v[4] = time([&] { i8.backward_data(x16.data(), wt, dx.data()); });
      if (it >= 3)
        for (int k = 0; k < 5; ++k) t[k].push_back(v[k]);
    }
    double m[5];
    for (int k = 0; k < 5; ++k) m[k] = median(t[k]);
    std::printf("%-8s %5lld %5lld | %8.3f %8.3f %8.3f %6.2f | %8.3f %8.3f %6.2f\n", s.name,
                static_cast<long long>(s.in), static_cast<long long>(s.out), m[0], m[1], m[2],
                m[0] / m[1], m[3], m[4], m[3] / m[4]);
  }
  return 0;
}
