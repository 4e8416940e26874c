// bench_nn: forward + backward time of one GptModel micro-batch, driven by hand through the units
// (what the engine's compute costs, without communication or optimizer), for fp32 and bf16 and
// 1 and 2 threads. Method: 3 warm-up iterations excluded, then N timed iterations; median and
// min reported. Gradient zeroing (the engine's job) is done outside the timed region.
//   bench_nn [iterations] [layers width heads context vocab batch]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "models/gpt/gpt.h"
#include "nn/gemm.h"
#include "unit/unit_harness.h"

using namespace zs;
using namespace zs::nn;

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  GptConfig base;
  if (argc > 7) {
    base.arch.layers = std::atoi(argv[2]);
    base.arch.width = std::atoi(argv[3]);
    base.arch.heads = std::atoi(argv[4]);
    base.arch.context = std::atoi(argv[5]);
    base.arch.vocab = std::atoi(argv[6]);
    base.run.batch = std::atoi(argv[7]);
  }
  const double tokens = static_cast<double>(base.run.batch) * base.arch.context;
  std::printf("GPT layers %d width %d heads %d context %d vocab %d batch %d (%lld params), %s\n",
              base.arch.layers, base.arch.width, base.arch.heads, base.arch.context,
              base.arch.vocab, base.run.batch, static_cast<long long>(base.num_params()),
              gemm_uses_onednn() ? "oneDNN GEMMs" : "Eigen GEMMs");
  // cpu ms: process CPU time per step (all threads, spin-waiting included); on a machine shared
  // with other jobs it shows the work done, where wall times show the share of cores obtained.
  std::printf("%-6s %-7s | %9s %9s %9s | %9s %10s | %9s\n", "dtype", "threads", "fwd ms", "bwd ms",
              "step ms", "tok/s", "best tok/s", "cpu ms");
  // ZS_BENCH_DTYPE=fp32|bf16 and ZS_BENCH_THREADS=n restrict the table to one row.
  const char* only_dt = std::getenv("ZS_BENCH_DTYPE");
  const char* only_th = std::getenv("ZS_BENCH_THREADS");
  for (DType dt : {DType::kF32, DType::kBF16}) {
    if (only_dt && parse_dtype(only_dt) != dt) continue;
    for (int threads : {1, 2}) {
      if (only_th && std::atoi(only_th) != threads) continue;
      GptConfig c = base;
      c.run.compute_dtype = dt;
      c.run.threads = threads;
      GptModel model(c);
      UnitHarness h(model, dt, 1);
      std::mt19937 rng(1);
      std::vector<int32_t> tok(static_cast<size_t>(c.run.batch) * (c.arch.context + 1));
      for (auto& t : tok) t = static_cast<int32_t>(rng() % c.arch.vocab);
      model.set_tokens(tok);
      std::vector<double> fwd, bwd, step;
      double cpu_ms = 0.0;  // process CPU time over the timed iterations
      auto cpu_now = [] {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
      };
      for (int i = 0; i < iters + 3; ++i) {
        model.load_micro_batch(0);
        h.zero_grads();  // the engine's job, outside the timed region
        const double c0 = cpu_now();
        auto t0 = std::chrono::steady_clock::now();
        h.forward();
        auto t1 = std::chrono::steady_clock::now();
        h.backward(1.0f, /*zero=*/false);
        auto t2 = std::chrono::steady_clock::now();
        const double c1 = cpu_now();
        if (i < 3) continue;
        cpu_ms += c1 - c0;
        fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        bwd.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        step.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
      }
      auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double best = *std::min_element(step.begin(), step.end());
      std::printf("%-6s %-7d | %9.2f %9.2f %9.2f | %9.0f %10.0f | %9.2f\n",
                  std::string(dtype_name(dt)).c_str(), threads, med(fwd), med(bwd), med(step),
                  tokens / (med(step) / 1e3), tokens / (best / 1e3), cpu_ms / iters);
    }
  }
  return 0;
}
