// bench_adam: throughput of the CPU AdamW (optim/cpu_adam.h) over N fp32 parameters, next to
// reference kernels measured in the same run on the same threads, and torch.optim.AdamW when a
// Python with torch is present.
//
// Method: every buffer is allocated once (HostArena: huge pages, zeroed) and first-touched with
// the benchmark's thread partition before any timing; each implementation runs --warmup
// untimed iterations, then --iters timed ones; the table shows the median. Bytes per parameter
// count what the kernel must move at least, reads plus writes, no write-allocate:
//   AdamW, fp32 grads: p, g, m, v read (16) + p, m, v written (12)            = 28 B
//   + bf16 copy of p written                                                  = 30 B
//   AdamW, bf16 grads + bf16 copy: 4 + 2 + 4 + 4 read, 4 + 4 + 4 + 2 written   = 28 B
//   Adam-shape stream: 4 fp32 arrays read, 3 written, one add each            = 28 B
//   STREAM triad (a = b + s * c, fp32): 2 read + 1 written                    = 12 B
//
// Usage: bench_adam [--n 67108864] [--threads T] [--iters 10] [--warmup 2] [--json] [--no-torch]
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "core/convert.h"
#include "core/error.h"
#include "offload/host_arena.h"
#include "optim/adamw.h"
#include "optim/cpu_adam.h"

namespace {

namespace po = boost::program_options;
using zs::DType;

struct Options {
  int64_t n = int64_t{64} << 20;
  int threads = 0;
  int iters = 10;
  int warmup = 2;
  bool json = false;
  bool torch = true;
};

struct Result {
  std::string impl;
  double bytes_per_param = 0;
  double median_s = 0;
};

// Median seconds of `iters` timed calls after `warmup` untimed ones.
double time_median(const Options& o, const std::function<void()>& fn) {
  for (int i = 0; i < o.warmup; ++i) fn();
  std::vector<double> ts;
  for (int i = 0; i < o.iters; ++i) {
    const double t0 = omp_get_wtime();
    fn();
    ts.push_back(omp_get_wtime() - t0);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// The reference kernels: plain loops the compiler vectorizes, statically partitioned over the
// same threads as the Adam kernels.
void adam_shape_stream(float* __restrict p, const float* __restrict g, float* __restrict m,
                       float* __restrict v, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    p[i] = p[i] + gi;
    m[i] = m[i] + gi;
    v[i] = v[i] + gi;
  }
}

void triad(float* __restrict a, const float* __restrict b, const float* __restrict c, float s,
           int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// optim::adamw_reference (scalar) on one contiguous chunk per thread.
void reference_threaded(float* p, const float* g, float* m, float* v, int64_t n,
                        const zs::optim::AdamWStep& s) {
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    zs::optim::adamw_reference(p + begin, g + begin, DType::kF32, m + begin, v + begin, end - begin,
                               s, nullptr, DType::kF32);
  }
}

// Runs bench/torch_adam_bench.py (torch.optim.AdamW, foreach) with tcmalloc preloaded when
// installed; returns false when /usr/bin/python3 cannot import torch.
bool run_torch(const Options& o, Result* r) {
  const std::string script = std::string(ZS_BENCH_DIR) + "/torch_adam_bench.py";
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    fmt::print(stderr,
               "torch not importable by /usr/bin/python3: skipped (apt-get install python3-torch "
               "libtcmalloc-minimal4, then rerun, or run {} by hand)\n",
               script);
    return false;
  }
  const char* tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
  const bool have_tc = std::system(fmt::format("test -e {}", tcmalloc).c_str()) == 0;
  const std::string cmd =
      fmt::format("{}/usr/bin/python3 {} --n {} --threads {} --iters {} --warmup {}",
                  have_tc ? fmt::format("LD_PRELOAD={} ", tcmalloc) : "", script, o.n, o.threads,
                  o.iters, o.warmup);
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return false;
  char line[512];
  double median_s = -1;
  std::string version;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char ver[64];
    double ms = 0;
    if (std::sscanf(line, "TORCH %63s %lf", ver, &ms) == 2) {
      version = ver;
      median_s = ms / 1e3;
    }
  }
  if (pclose(f) != 0 || median_s <= 0) return false;
  r->impl = fmt::format("torch {} AdamW(foreach){}", version, have_tc ? " +tcmalloc" : "");
  r->bytes_per_param = 28;
  r->median_s = median_s;
  return true;
}

int run(const Options& o) {
  const int64_t n = o.n;
  omp_set_num_threads(o.threads);
  zs::optim::set_cpu_adam_threads(o.threads);

  // One arena: p, m, v, g32, a spare fp32 array (triad), g16 and out16. [n each]
  // Each span is padded by 320 B: with N a power of two, unpadded spans would start at
  // power-of-two distances, and p[i], m[i], v[i], g[i] would share cache sets and alias in the
  // 4 KiB store-to-load check (measured: the plain loops ran 5-10x slower at N = 2^26).
  constexpr int64_t kPad = 320;
  zs::offload::HostArena arena(n * (5 * 4 + 2 * 2) + 8 * (kPad + 64));
  float* p = arena.take(n + kPad / 4);
  float* m = arena.take(n + kPad / 4);
  float* v = arena.take(n + kPad / 4);
  float* g = arena.take(n + kPad / 4);
  float* spare = arena.take(n + kPad / 4);
  auto* g16 = static_cast<uint16_t*>(arena.take_bytes(2 * n + kPad));
  auto* out16 = static_cast<uint16_t*>(arena.take_bytes(2 * n + kPad));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>((i * 2654435761u) % 1000003) / 1000003.0f - 0.5f;
    p[i] = 0.02f * x;
    g[i] = 1e-3f * (x + 0.25f);
    g16[i] = zs::fp32_to_bf16_bits(g[i]);
    m[i] = 0.0f;
    v[i] = 0.0f;
    spare[i] = x;
    out16[i] = 0;
  }

  zs::optim::AdamWConfig cfg;
  const zs::optim::AdamWStep s = zs::optim::make_adamw_step(cfg, 1e-3f, 10, 1.0f, true);
  std::vector<Result> rs;
  auto bench = [&](std::string impl, double bytes, const std::function<void()>& fn) {
    rs.push_back({std::move(impl), bytes, time_median(o, fn)});
  };
  const std::string isa = zs::optim::cpu_adam_isa();
  bench("stream triad (fp32)", 12, [&] { triad(spare, g, p, 1.0001f, n); });
  bench("adam-shape stream (4 read, 3 written)", 28, [&] { adam_shape_stream(spare, g, m, v, n); });
  // The stream kernel grew m and v; restore Adam-like state before timing AdamW.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = v[i] = 0.0f;
  bench(fmt::format("cpu_adamw {} fp32 grads", isa), 28,
        [&] { zs::optim::cpu_adamw(p, g, DType::kF32, m, v, n, s, nullptr, DType::kF32); });
  bench(fmt::format("cpu_adamw {} fp32 grads + bf16 out", isa), 30,
        [&] { zs::optim::cpu_adamw(p, g, DType::kF32, m, v, n, s, out16, DType::kBF16); });
  bench(fmt::format("cpu_adamw {} bf16 grads + bf16 out", isa), 28,
        [&] { zs::optim::cpu_adamw(p, g16, DType::kBF16, m, v, n, s, out16, DType::kBF16); });
  bench("adamw_reference (scalar, fp32 grads)", 28, [&] { reference_threaded(p, g, m, v, n, s); });
  Result tr;
  if (o.torch && run_torch(o, &tr)) rs.push_back(tr);

  const double ref_gbps = 28.0 * n / rs[1].median_s / 1e9;
  if (o.json) {
    for (const Result& r : rs) {
      fmt::print(
          "{{\"impl\": \"{}\", \"n\": {}, \"threads\": {}, \"bytes_per_param\": {}, "
          "\"median_ms\": {:.3f}, \"params_per_s\": {:.4e}, \"gbps\": {:.2f}, \"ref_gbps\": "
          "{:.2f}}}\n",
          r.impl, n, o.threads, r.bytes_per_param, r.median_s * 1e3, n / r.median_s,
          r.bytes_per_param * n / r.median_s / 1e9, ref_gbps);
    }
    return 0;
  }
  fmt::print("bench_adam: N = {} params, {} threads, median of {} iterations after {} warm-up\n", n,
             o.threads, o.iters, o.warmup);
  fmt::print("{:<46} {:>6} {:>10} {:>10} {:>8} {:>10}\n", "implementation", "B/par", "median ms",
             "Gparams/s", "GB/s", "% of ref");
  for (const Result& r : rs) {
    const double gbps = r.bytes_per_param * n / r.median_s / 1e9;
    fmt::print("{:<46} {:>6} {:>10.2f} {:>10.3f} {:>8.1f} {:>9.0f}%\n", r.impl, r.bytes_per_param,
               r.median_s * 1e3, n / r.median_s / 1e9, gbps, 100.0 * gbps / ref_gbps);
  }
  fmt::print(
      "ref = adam-shape stream; GB/s counts the bytes above (reads + writes, no "
      "write-allocate)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  po::options_description desc("bench_adam options");
  desc.add_options()("help", "this message")("n", po::value<int64_t>(&o.n)->default_value(o.n),
                                             "parameters")(
      "threads", po::value<int>(&o.threads)->default_value(0),
      "threads (0: omp_get_max_threads())")(
      "iters", po::value<int>(&o.iters)->default_value(o.iters), "timed iterations")(
      "warmup", po::value<int>(&o.warmup)->default_value(o.warmup), "untimed iterations")(
      "json", po::bool_switch(&o.json), "one JSON object per implementation")(
      "no-torch", "do not run torch.optim.AdamW");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << desc;
      return 0;
    }
    o.torch = vm.count("no-torch") == 0;
    if (o.threads <= 0) o.threads = omp_get_max_threads();
    ZS_CHECK(o.n > 0 && o.iters > 0 && o.warmup >= 0, zs::ErrorCode::kInvalidArgument,
             "bench_adam: need --n > 0, --iters > 0, --warmup >= 0");
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_adam: {}\n", e.what());
    return 1;
  }
}
