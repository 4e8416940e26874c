// bench_collectives: zeroshard's MpiCommunicator against the raw MPI calls, side by side in one
// run.
//
//   mpirun -np 2 bench_collectives [--min-bytes 1024] [--max-bytes 268435456] [--step 4]
//          [--iters 10] [--warmup 3] [--ops all_gather,reduce_scatter,all_reduce] [--json]
//
// Method (nccl-tests style): fp32 sum; `size` is the bytes of the full buffer (all-gather's
// output, reduce-scatter's input, all-reduce's buffer) and `count` its elements. Each iteration is
// preceded by MPI_Barrier and timed with MPI_Wtime; an iteration's time is the max over ranks;
// warm-up iterations are excluded; the reported time is the median. The two implementations'
// iterations alternate (zeroshard, raw MPI, zeroshard, ...), so that a noisy neighbour or a
// frequency change hits both alike. algbw = size / time; busbw = algbw * (n-1)/n for all-gather
// and reduce-scatter, * 2(n-1)/n for all-reduce. #wrong counts the elements of one further call
// of each implementation, run alone on a zeroed output, that differ from the expected values
// (data are small integers, so sums are exact in any order), summed over ranks.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "collectives/mpi_communicator.h"
#include "core/buffer.h"
#include "core/error.h"

namespace po = boost::program_options;
using zs::CollectiveKind;
using zs::DType;
using zs::ReduceOp;

namespace {

struct Options {
  size_t min_bytes = 1024;
  size_t max_bytes = size_t{256} << 20;
  size_t step = 4;
  int iters = 10;
  int warmup = 3;
  std::vector<std::string> ops = {"all_gather", "reduce_scatter", "all_reduce"};
  bool json = false;
};

struct Result {
  double time_us = 0, algbw = 0, busbw = 0;
  long wrong = 0;
};

float value(int rank, size_t global_index) {
  return static_cast<float>((rank + global_index) % 13);
}

// Times the two implementations of one row as described at the top, their iterations
// interleaved (zeroshard, raw, zeroshard, raw, ...) so that both see the same machine state;
// returns the median of the per-iteration max over ranks of each.
std::pair<double, double> time_pair(const std::function<void()>& a, const std::function<void()>& b,
                                    const Options& o) {
  std::vector<double> times[2];
  auto once = [](const std::function<void()>& op) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    op();
    double t = MPI_Wtime() - t0, tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
  };
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    const double ta = once(a);
    const double tb = once(b);
    if (it >= o.warmup) {
      times[0].push_back(ta);
      times[1].push_back(tb);
    }
  }
  double med[2];
  for (int k = 0; k < 2; ++k) {
    std::sort(times[k].begin(), times[k].end());
    const size_t m = times[k].size();
    med[k] = m % 2 ? times[k][m / 2] : 0.5 * (times[k][m / 2 - 1] + times[k][m / 2]);
  }
  return {med[0], med[1]};
}

class Bench {
 public:
  Bench(const Options& o) : o_(o), zs_(zs::MpiCommunicator::world()) {
    MPI_Comm_dup(MPI_COMM_WORLD, &raw_);
    rank_ = zs_->rank();
    n_ = zs_->size();
    // Buffers sized for the largest call, allocated and touched once (zs::Buffer zero-fills).
    const size_t elems = o.max_bytes / sizeof(float) + n_;
    send_ = zs::Buffer(elems * sizeof(float), zs::MemCategory::kOther);
    recv_ = zs::Buffer(elems * sizeof(float), zs::MemCategory::kOther);
    zs_->reserve(zs_->scratch_bytes(CollectiveKind::kAllReduce, elems, DType::kF32));
  }
  ~Bench() { MPI_Comm_free(&raw_); }

  // Full-buffer elements for `bytes`, rounded down to a multiple of n (at least n).
  size_t total_count(size_t bytes) const {
    return std::max<size_t>(bytes / sizeof(float) / n_, 1) * n_;
  }

  // Both implementations of one row: {zeroshard, raw MPI}.
  std::pair<Result, Result> run(const std::string& op, size_t total) {
    float* s = send_.as<float>();
    float* r = recv_.as<float>();
    const size_t per_rank = total / n_;
    std::function<void()> fz, fm;
    double factor = static_cast<double>(n_ - 1) / n_;
    if (op == "all_gather") {
      for (size_t i = 0; i < per_rank; ++i) s[i] = value(rank_, rank_ * per_rank + i);
      fz = [&] { zs_->all_gather(s, r, per_rank, DType::kF32); };
      fm = [&] {
        MPI_Allgather(s, static_cast<int>(per_rank), MPI_FLOAT, r, static_cast<int>(per_rank),
                      MPI_FLOAT, raw_);
      };
    } else if (op == "reduce_scatter") {
      for (size_t i = 0; i < total; ++i) s[i] = value(rank_, i);
      fz = [&] { zs_->reduce_scatter(s, r, per_rank, DType::kF32, ReduceOp::kSum); };
      fm = [&] {
        MPI_Reduce_scatter_block(s, r, static_cast<int>(per_rank), MPI_FLOAT, MPI_SUM, raw_);
      };
    } else if (op == "all_reduce") {
      for (size_t i = 0; i < total; ++i) s[i] = value(rank_, i);
      factor *= 2;
      fz = [&] { zs_->all_reduce(s, r, total, DType::kF32, ReduceOp::kSum); };
      fm = [&] { MPI_Allreduce(s, r, static_cast<int>(total), MPI_FLOAT, MPI_SUM, raw_); };
    } else {
      zs::fail(zs::ErrorCode::kInvalidArgument,
               "bench_collectives: unknown op '{}' (all_gather, reduce_scatter, all_reduce)", op);
    }
    const auto [tz, tm] = time_pair(fz, fm, o_);
    Result res[2];
    const double t[2] = {tz, tm};
    const std::function<void()>* f[2] = {&fz, &fm};
    for (int k = 0; k < 2; ++k) {
      res[k].time_us = t[k] * 1e6;
      res[k].algbw = total * sizeof(float) / t[k] / 1e9;
      res[k].busbw = res[k].algbw * factor;
      std::memset(r, 0, total * sizeof(float));
      (*f[k])();  // once more, alone, to check its result
      long wrong = check(op, total);
      MPI_Allreduce(&wrong, &res[k].wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    return {res[0], res[1]};
  }

  int rank() const { return rank_; }
  int size() const { return n_; }

 private:
  long check(const std::string& op, size_t total) {
    const float* r = recv_.as<float>();
    const size_t per_rank = total / n_;
    long wrong = 0;
    auto sum_at = [&](size_t g) {
      float acc = 0;
      for (int q = 0; q < n_; ++q) acc += value(q, g);
      return acc;
    };
    if (op == "all_gather") {
      for (size_t g = 0; g < total; ++g) wrong += r[g] != value(static_cast<int>(g / per_rank), g);
    } else if (op == "reduce_scatter") {
      for (size_t i = 0; i < per_rank; ++i) wrong += r[i] != sum_at(rank_ * per_rank + i);
    } else {
      for (size_t g = 0; g < total; ++g) wrong += r[g] != sum_at(g);
    }
    return wrong;
  }

  Options o_;
  std::unique_ptr<zs::MpiCommunicator> zs_;
  MPI_Comm raw_ = MPI_COMM_NULL;
  zs::Buffer send_, recv_;
  int rank_ = 0, n_ = 1;
};

std::string human(size_t b) {
  std::ostringstream s;
  if (b >= (size_t{1} << 20)) {
    s << (b >> 20) << " MiB";
  } else {
    s << (b >> 10) << " KiB";
  }
  return s.str();
}

bool parse(int argc, char** argv, Options& o, int rank) {
  std::string ops = "all_gather,reduce_scatter,all_reduce";
  po::options_description d("bench_collectives options");
  d.add_options()("help,h", "print this help")("min-bytes",
                                               po::value(&o.min_bytes)->default_value(o.min_bytes),
                                               "smallest full-buffer size")(
      "max-bytes", po::value(&o.max_bytes)->default_value(o.max_bytes), "largest full-buffer size")(
      "step", po::value(&o.step)->default_value(o.step), "size multiplier between rows (2 or 4)")(
      "iters", po::value(&o.iters)->default_value(o.iters), "timed iterations per row (median)")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed iterations per row")(
      "ops", po::value(&ops)->default_value(ops), "comma-separated collectives")(
      "json", po::bool_switch(&o.json), "one JSON object per row instead of the table");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, d), vm);
  po::notify(vm);
  if (vm.count("help")) {
    if (rank == 0) std::cout << d << "\n";
    return false;
  }
  ZS_CHECK(o.step >= 2 && o.iters >= 1 && o.warmup >= 0 && o.min_bytes >= 4 &&
               o.min_bytes <= o.max_bytes,
           zs::ErrorCode::kInvalidArgument,
           "bench_collectives: need step >= 2, iters >= 1, warmup >= 0, 4 <= min-bytes <= "
           "max-bytes");
  o.ops.clear();
  std::stringstream ss(ops);
  for (std::string op; std::getline(ss, op, ',');) o.ops.push_back(op);
  return true;
}

void run(int argc, char** argv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  if (!parse(argc, argv, o, rank)) return;
  Bench b(o);
  if (rank == 0 && !o.json) {
    std::printf(
        "# bench_collectives: %d ranks, fp32 sum, %d warm-up + %d timed iterations, "
        "median of per-iteration max over ranks\n",
        b.size(), o.warmup, o.iters);
    std::printf("# %-14s %10s %12s %5s %5s | %-38s | %-38s\n", "", "", "", "", "",
                "            zeroshard", "            raw MPI");
    std::printf("# %-14s %10s %12s %5s %5s | %10s %8s %8s %8s | %10s %8s %8s %8s\n", "op", "size",
                "count", "type", "redop", "time_us", "algbw", "busbw", "#wrong", "time_us", "algbw",
                "busbw", "#wrong");
  }
  for (const auto& op : o.ops) {
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step) {
      const size_t total = b.total_count(bytes);
      const auto [z, m] = b.run(op, total);
      if (rank != 0) continue;
      const size_t sz = total * sizeof(float);
      if (o.json) {
        for (const auto& [impl, r] : {std::pair{"zeroshard", z}, std::pair{"mpi", m}}) {
          std::printf(
              "{\"op\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"impl\": \"%s\", "
              "\"time_us\": %.2f, \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f, "
              "\"wrong\": %ld}\n",
              op.c_str(), sz, b.size(), impl, r.time_us, r.algbw, r.busbw, r.wrong);
        }
      } else {
        const char* redop = op == "all_gather" ? "none" : "sum";
        std::printf(
            "  %-14s %10s %12zu %5s %5s | %10.1f %8.2f %8.2f %8ld | %10.1f %8.2f %8.2f "
            "%8ld\n",
            op.c_str(), human(sz).c_str(), total, "float", redop, z.time_us, z.algbw, z.busbw,
            z.wrong, m.time_us, m.algbw, m.busbw, m.wrong);
      }
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_collectives: %s\n", e.what());
    rc = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);  // other ranks may be waiting in a collective
  }
  MPI_Finalize();
  return rc;
}
