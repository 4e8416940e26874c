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
//   AdamW, bf16 states, fp32 grads: p, g read (8) + m, v read (4); p written (4) + m, v (4) = 20 B
//   AdamW, int8 states (block B), fp32 grads: p, g (8) + codes (2) + scales (8 / B) read,
//     p (4) + codes (2) + scales (8 / B) written                              = 16 + 16 / B B
//   (+ 2 B for a bf16 copy of p written)
//   bitsandbytes AdamW8bit: as our int8 states (block 256)                    = 16.06 B
//   torch AdamW (foreach or fused), fp32 states: as ours                      = 28 B
//
// Usage: bench_adam [--n 67108864] [--threads T] [--iters 10] [--warmup 2] [--json] [--no-torch]
//                   [--torch-python P] [--torch2-python P] [--bnb-python P]
// The peers run bench/torch_adam_bench.py: --torch-python (default /usr/bin/python3) for
// torch.optim.AdamW(foreach), --torch2-python (a PyTorch >= 2.4) for AdamW(fused=True),
// --bnb-python (with bitsandbytes installed) for bitsandbytes' AdamW8bit; a peer that does not run
// gets a line saying why.
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
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/state_quant.h"
#include "offload/host_arena.h"
#include "optim/adamw.h"
#include "optim/cpu_adam.h"
#include "optim/state_adam.h"

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
  std::string torch_python = "/usr/bin/python3";
  std::string torch2_python;  // empty: no fused row
  std::string bnb_python;     // empty: no bitsandbytes row
};

struct Result {
  std::string impl;
  double bytes_per_param = 0;
  double median_s = 0;  // 0: not measured, `why` says why
  std::string why;
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

// The CPU's name from /proc/cpuinfo ("model name"), else from cpuid.
std::string cpu_name() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  char line[512];
  std::string name;
  while (f != nullptr && name.empty() && std::fgets(line, sizeof line, f) != nullptr) {
    const std::string l = line;
    if (l.rfind("model name", 0) == 0 && l.find(':') != std::string::npos) {
      name = l.substr(l.find(':') + 2);
      if (!name.empty() && name.back() == '\n') name.pop_back();
    }
  }
  if (f != nullptr) std::fclose(f);
  return name.empty() ? zs::cpu_model_name() : name;
}

// Runs bench/torch_adam_bench.py --impl `impl` with `python` (tcmalloc preloaded when installed).
// The result's median is 0 and `why` says why when the peer did not run.
Result run_peer(const Options& o, const std::string& python, const std::string& impl,
                const std::string& label, double bytes) {
  Result r{label, bytes, 0, ""};
  const std::string script = std::string(ZS_BENCH_DIR) + "/torch_adam_bench.py";
  const char* tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
  const bool have_tc = std::system(fmt::format("test -e {}", tcmalloc).c_str()) == 0;
  const std::string cmd =
      fmt::format("{}{} {} --impl {} --n {} --threads {} --iters {} --warmup {} 2>&1",
                  have_tc ? fmt::format("LD_PRELOAD={} ", tcmalloc) : "", python, script, impl, o.n,
                  o.threads, o.iters, o.warmup);
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r.why = "popen failed", r;
  char line[512];
  std::string last;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char ver[64];
    double ms = 0;
    last = line;
    if (std::sscanf(line, "TORCH %63s %lf", ver, &ms) == 2) {
      r.impl = fmt::format("torch {} {}{}", ver, label, have_tc ? " +tcmalloc" : "");
      r.median_s = ms / 1e3;
    } else if (last.rfind("SKIP ", 0) == 0) {
      r.why = last.substr(5);
    }
  }
  const int status = pclose(f);
  if (r.median_s <= 0 && r.why.empty()) {
    r.why = fmt::format("{} exited with status {}: {}", python, status, last);
  }
  while (!r.why.empty() && r.why.back() == '\n') r.why.pop_back();
  return r;
}

// Every buffer, allocated once (HostArena: huge pages, zeroed) and first-touched in parallel.
// Each span is padded by 320 B: with N a power of two, unpadded spans would start at power-of-two
// distances, and p[i], m[i], v[i], g[i] would share cache sets and alias in the 4 KiB
// store-to-load check (measured: the plain loops ran 5-10x slower at N = 2^26).
struct Buffers {
  static constexpr int64_t kPad = 320;
  static constexpr int64_t kBlock = 256;  // int8 states
  explicit Buffers(int64_t n)
      : arena(n * (5 * 4 + 4 * 2 + 2) + 16 * (kPad + 64) + 2 * 4 * (n / kBlock + 1)) {
    for (float** f : {&p, &m, &v, &g, &spare}) *f = arena.take(n + kPad / 4);
    for (uint16_t** h : {&g16, &out16, &m16, &v16}) {
      *h = static_cast<uint16_t*>(arena.take_bytes(2 * n + kPad));
    }
    for (uint8_t** c : {&mc, &vc}) *c = static_cast<uint8_t*>(arena.take_bytes(n + kPad));
    for (float** f : {&ms, &vs}) *f = arena.take(n / kBlock + 1 + kPad / 4);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float x = static_cast<float>((i * 2654435761u) % 1000003) / 1000003.0f - 0.5f;
      p[i] = 0.02f * x;
      g[i] = 1e-3f * (x + 0.25f);
      g16[i] = zs::fp32_to_bf16_bits(g[i]);
      m[i] = v[i] = 0.0f;
      spare[i] = x;
      out16[i] = m16[i] = v16[i] = 0;
      mc[i] = vc[i] = 0;
      if (i % kBlock == 0) ms[i / kBlock] = vs[i / kBlock] = 0.0f;
    }
  }
  zs::offload::HostArena arena;
  float *p, *m, *v, *g, *spare;       // [n]
  uint16_t *g16, *out16, *m16, *v16;  // [n]
  uint8_t *mc, *vc;                   // [n] int8-state codes
  float *ms, *vs;                     // [n / kBlock + 1] int8-state scales
};

using Bench = std::function<void(std::string, double, const std::function<void()>&)>;

// Our fp32-state AdamW rows and the stream references they are held against.
void bench_fp32_states(int64_t n, Buffers& b, const zs::optim::AdamWStep& s, const Bench& bench) {
  const std::string isa = zs::optim::cpu_adam_isa();
  bench("stream triad (fp32)", 12, [&] { triad(b.spare, b.g, b.p, 1.0001f, n); });
  bench("adam-shape stream (4 read, 3 written)", 28,
        [&] { adam_shape_stream(b.spare, b.g, b.m, b.v, n); });
  // The stream kernel grew m and v; restore Adam-like state before timing AdamW.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) b.m[i] = b.v[i] = 0.0f;
  bench(fmt::format("cpu_adamw {} fp32 grads", isa), 28,
        [&] { zs::optim::cpu_adamw(b.p, b.g, DType::kF32, b.m, b.v, n, s, nullptr, DType::kF32); });
  bench(fmt::format("cpu_adamw {} fp32 grads + bf16 out", isa), 30, [&] {
    zs::optim::cpu_adamw(b.p, b.g, DType::kF32, b.m, b.v, n, s, b.out16, DType::kBF16);
  });
  bench(fmt::format("cpu_adamw {} bf16 grads + bf16 out", isa), 28, [&] {
    zs::optim::cpu_adamw(b.p, b.g16, DType::kBF16, b.m, b.v, n, s, b.out16, DType::kBF16);
  });
  bench("adamw_reference (scalar, fp32 grads)", 28,
        [&] { reference_threaded(b.p, b.g, b.m, b.v, n, s); });
}

// Zeroes the int8-state codes and scales (a fresh state for the next code book's rows).
void reset_int8_states(int64_t n, Buffers& b) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    b.mc[i] = b.vc[i] = 0;
    if (i % Buffers::kBlock == 0) b.ms[i / Buffers::kBlock] = b.vs[i / Buffers::kBlock] = 0.0f;
  }
}

// The bf16- and int8-state rows (optim/state_adam.h; int8 in both code books), fp32 grads,
// without and with a bf16 out.
void bench_low_bit_states(int64_t n, Buffers& b, const zs::optim::AdamWStep& s,
                          const Bench& bench) {
  namespace opt = zs::optim;
  const std::string isa = opt::cpu_adam_isa();
  const double int8_bytes = 16.0 + 16.0 / Buffers::kBlock;
  for (bool out : {false, true}) {
    uint16_t* o16 = out ? b.out16 : nullptr;
    const char* tail = out ? " + bf16 out" : "";
    bench(fmt::format("bf16 states {} fp32 grads{}", isa, tail), 20 + 2 * out, [&] {
      opt::cpu_adamw_bf16_states(b.p, b.g, DType::kF32, b.m16, b.v16, n, s, o16, DType::kBF16);
    });
    for (zs::StateCode code : {zs::StateCode::kFloat8, zs::StateCode::kDynamic}) {
      const opt::Int8StateFormat f{Buffers::kBlock, code};
      reset_int8_states(n, b);
      bench(fmt::format("int8 states {} {} fp32 grads{}", zs::state_code_name(code), isa, tail),
            int8_bytes + 2 * out, [&] {
              opt::cpu_adamw_int8_states(b.p, b.g, DType::kF32, {b.mc, b.ms}, {b.vc, b.vs}, n, f, s,
                                         o16, DType::kBF16);
            });
    }
  }
}

// The peers, each in its own Python process after ours (so they do not share the CPU with us).
void bench_peers(const Options& o, std::vector<Result>* rs) {
  if (!o.torch) return;
  rs->push_back(run_peer(o, o.torch_python, "foreach", "AdamW(foreach)", 28));
  if (!o.torch2_python.empty()) {
    rs->push_back(run_peer(o, o.torch2_python, "fused", "AdamW(fused=True)", 28));
  }
  if (!o.bnb_python.empty()) {
    rs->push_back(run_peer(o, o.bnb_python, "bnb8bit", "bnb AdamW8bit (B=256)", 16.0 + 16.0 / 256));
  }
}

// Params/s of the first measured row whose name contains `key` (0 when none).
double rate_of(const std::vector<Result>& rs, int64_t n, const std::string& key) {
  for (const Result& r : rs) {
    if (r.median_s > 0 && r.impl.find(key) != std::string::npos) return n / r.median_s;
  }
  return 0;
}

void print_table(const Options& o, const std::vector<Result>& rs) {
  const int64_t n = o.n;
  const double ref_gbps = 28.0 * n / rs[1].median_s / 1e9;
  if (o.json) {
    for (const Result& r : rs) {
      if (r.median_s <= 0) continue;
      fmt::print(
          "{{\"impl\": \"{}\", \"n\": {}, \"threads\": {}, \"bytes_per_param\": {}, "
          "\"median_ms\": {:.3f}, \"params_per_s\": {:.4e}, \"gbps\": {:.2f}, \"ref_gbps\": "
          "{:.2f}}}\n",
          r.impl, n, o.threads, r.bytes_per_param, r.median_s * 1e3, n / r.median_s,
          r.bytes_per_param * n / r.median_s / 1e9, ref_gbps);
    }
    return;
  }
  fmt::print(
      "bench_adam: {}; N = {} params, {} threads, median of {} iterations after {} warm-up\n",
      cpu_name(), n, o.threads, o.iters, o.warmup);
  fmt::print("{:<52} {:>6} {:>10} {:>10} {:>8} {:>10}\n", "implementation", "B/par", "median ms",
             "Gparams/s", "GB/s", "% of ref");
  for (const Result& r : rs) {
    if (r.median_s <= 0) {
      fmt::print("{:<52} not measured: {}\n", r.impl, r.why);
      continue;
    }
    const double gbps = r.bytes_per_param * n / r.median_s / 1e9;
    fmt::print("{:<52} {:>6.4g} {:>10.2f} {:>10.3f} {:>8.1f} {:>9.0f}%\n", r.impl,
               r.bytes_per_param, r.median_s * 1e3, n / r.median_s / 1e9, gbps,
               100.0 * gbps / ref_gbps);
  }
  fmt::print(
      "ref = adam-shape stream; GB/s counts the bytes above (reads + writes, no "
      "write-allocate)\n");
  for (const char* mine : {"int8 states float8", "int8 states dynamic"}) {
    const double int8 = rate_of(rs, n, mine);
    for (const char* key :
         {"cpu_adamw", "bf16 states", "AdamW(foreach)", "AdamW(fused", "AdamW8bit"}) {
      const double other = rate_of(rs, n, key);
      if (int8 > 0 && other > 0) fmt::print("{} / {}: {:.2f}x params/s\n", mine, key, int8 / other);
    }
  }
}

int run(const Options& o) {
  omp_set_num_threads(o.threads);
  zs::optim::set_cpu_adam_threads(o.threads);
  Buffers b(o.n);
  zs::optim::AdamWConfig cfg;
  const zs::optim::AdamWStep s = zs::optim::make_adamw_step(cfg, 1e-3f, 10, 1.0f, true);
  std::vector<Result> rs;
  const Bench bench = [&](std::string impl, double bytes, const std::function<void()>& fn) {
    rs.push_back({std::move(impl), bytes, time_median(o, fn), ""});
  };
  bench_fp32_states(o.n, b, s, bench);
  bench_low_bit_states(o.n, b, s, bench);
  bench_peers(o, &rs);
  print_table(o, rs);
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
      "no-torch", "do not run the PyTorch peers")(
      "torch-python", po::value<std::string>(&o.torch_python)->default_value(o.torch_python),
      "Python with torch for the AdamW(foreach) row")(
      "torch2-python", po::value<std::string>(&o.torch2_python),
      "Python with torch >= 2.4 for the AdamW(fused=True) row (none: no row)")(
      "bnb-python", po::value<std::string>(&o.bnb_python),
      "Python with torch and bitsandbytes for the AdamW8bit row (none: no row)");
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
