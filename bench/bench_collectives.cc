// bench_collectives: zeroshard's MpiCommunicator against the raw MPI calls, side by side in one
// run, and with --hierarchical its HierarchicalCommunicator beside them.
//
//   mpirun -np 2 bench_collectives [--min-bytes 1024] [--max-bytes 268435456] [--step 4]
//          [--iters 10] [--warmup 3] [--ops all_gather,reduce_scatter,all_reduce] [--json]
//          [--hierarchical] [--fake-nodes K] [--fit] [--fit-out FILE --fit-class CLASS]
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
// --hierarchical adds a third implementation to every row, zeroshard's HierarchicalCommunicator
// over the same world ([Note: hierarchical collectives] in collectives/hierarchical_communicator.h;
// nodes as MPI finds them, or --fake-nodes K contiguous blocks), interleaved with the other two;
// its inter_B column is the inter-node bytes one call sends per rank ([Note: link counters]), max
// over ranks. --fit ends each op with time = alpha + beta * B per implementation, B = the ring
// lower bound of the bytes each rank sends (all-gather and reduce-scatter (n-1)/n * size,
// all-reduce 2(n-1)/n * size; for a 2-rank all-gather exactly the bytes each rank sends): beta is
// the least-squares slope over the larger half of the rows (at least two), where bandwidth
// dominates; alpha is the smallest row's time, where latency does. Two regimes rather than one
// least-squares line, because neither link is linear over the whole range: a tbf-shaped link
// passes its bucket (1 ms at the rate) at wire speed, and shared memory is 10x faster for
// messages that stay in cache.
// --fit-out FILE (implies --fit) writes the first op's zeroshard fit into FILE as the link class
// --fit-class (intra_node or inter_node; the other class already in FILE is kept), the form
// planner/comm_model.h loads (zs_plan --links FILE): run it on a 1-node x 2-rank layout for
// intra_node and a 2-node x 1-rank one for inter_node (docs/scaling.md).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "collectives/hierarchical_communicator.h"
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
  bool hierarchical = false;
  int fake_nodes = -1;  // -1: ZS_FAKE_NODES (Settings), 0: the real nodes
  bool fit = false;
  std::string fit_out;                   // --fit-out: the links file to write
  std::string fit_class = "inter_node";  // --fit-class
};

struct Result {
  double time_us = 0, algbw = 0, busbw = 0;
  long wrong = 0;
  long inter_bytes = -1;  // hierarchical: inter-node bytes sent per rank per call (max over ranks)
};

float value(int rank, size_t global_index) {
  return static_cast<float>((rank + global_index) % 13);
}

// Times the implementations of one row as described at the top, their iterations interleaved
// (zeroshard, raw, [hierarchical,] zeroshard, ...) so that all see the same machine state;
// returns the median of the per-iteration max over ranks of each.
std::vector<double> time_interleaved(const std::vector<std::function<void()>>& fs,
                                     const Options& o) {
  std::vector<std::vector<double>> times(fs.size());
  auto once = [](const std::function<void()>& op) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    op();
    double t = MPI_Wtime() - t0, tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
  };
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    for (size_t k = 0; k < fs.size(); ++k) {
      const double t = once(fs[k]);
      if (it >= o.warmup) times[k].push_back(t);
    }
  }
  std::vector<double> med(fs.size());
  for (size_t k = 0; k < fs.size(); ++k) {
    std::sort(times[k].begin(), times[k].end());
    const size_t m = times[k].size();
    med[k] = m % 2 ? times[k][m / 2] : 0.5 * (times[k][m / 2 - 1] + times[k][m / 2]);
  }
  return med;
}

// alpha, beta of time = alpha + beta * x over rows in increasing x (see --fit at the top): beta
// the least-squares slope over the larger half of the rows (at least two), alpha the first row's
// time. {0, 0} with fewer than two rows.
std::pair<double, double> fit_alpha_beta(const std::vector<double>& x,
                                         const std::vector<double>& t) {
  const size_t m = x.size();
  if (m < 2) return {0, 0};
  const size_t from = std::min(m / 2, m - 2);
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  const double k = static_cast<double>(m - from);
  for (size_t i = from; i < m; ++i) {
    sx += x[i];
    st += t[i];
    sxx += x[i] * x[i];
    sxt += x[i] * t[i];
  }
  const double det = k * sxx - sx * sx;
  const double beta = det == 0 ? 0 : (k * sxt - sx * st) / det;
  return {t[0], beta};
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
    if (o.hierarchical) {
      h_ = o.fake_nodes < 0 ? std::make_unique<zs::HierarchicalCommunicator>(*zs_)
                            : std::make_unique<zs::HierarchicalCommunicator>(*zs_, o.fake_nodes);
      for (auto kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
        h_->reserve(kind, elems / n_, DType::kF32);
      }
      h_->reserve(CollectiveKind::kAllReduce, elems, DType::kF32);
    }
  }
  ~Bench() { MPI_Comm_free(&raw_); }

  // Full-buffer elements for `bytes`, rounded down to a multiple of n (at least n).
  size_t total_count(size_t bytes) const {
    return std::max<size_t>(bytes / sizeof(float) / n_, 1) * n_;
  }

  // The implementations of one row: {zeroshard, raw MPI[, hierarchical]}.
  std::vector<Result> run(const std::string& op, size_t total) {
    float* s = send_.as<float>();
    float* r = recv_.as<float>();
    const size_t per_rank = total / n_;
    std::function<void()> fz, fm, fh;
    zs::HierarchicalCommunicator* h = h_.get();
    double factor = static_cast<double>(n_ - 1) / n_;
    if (op == "all_gather") {
      for (size_t i = 0; i < per_rank; ++i) s[i] = value(rank_, rank_ * per_rank + i);
      fz = [&] { zs_->all_gather(s, r, per_rank, DType::kF32); };
      fh = [&] { h->all_gather(s, r, per_rank, DType::kF32); };
      fm = [&] {
        MPI_Allgather(s, static_cast<int>(per_rank), MPI_FLOAT, r, static_cast<int>(per_rank),
                      MPI_FLOAT, raw_);
      };
    } else if (op == "reduce_scatter") {
      for (size_t i = 0; i < total; ++i) s[i] = value(rank_, i);
      fz = [&] { zs_->reduce_scatter(s, r, per_rank, DType::kF32, ReduceOp::kSum); };
      fh = [&] { h->reduce_scatter(s, r, per_rank, DType::kF32, ReduceOp::kSum); };
      fm = [&] {
        MPI_Reduce_scatter_block(s, r, static_cast<int>(per_rank), MPI_FLOAT, MPI_SUM, raw_);
      };
    } else if (op == "all_reduce") {
      for (size_t i = 0; i < total; ++i) s[i] = value(rank_, i);
      factor *= 2;
      fz = [&] { zs_->all_reduce(s, r, total, DType::kF32, ReduceOp::kSum); };
      fh = [&] { h->all_reduce(s, r, total, DType::kF32, ReduceOp::kSum); };
      fm = [&] { MPI_Allreduce(s, r, static_cast<int>(total), MPI_FLOAT, MPI_SUM, raw_); };
    } else {
      zs::fail(zs::ErrorCode::kInvalidArgument,
               "bench_collectives: unknown op '{}' (all_gather, reduce_scatter, all_reduce)", op);
    }
    std::vector<std::function<void()>> f = {fz, fm};
    if (h != nullptr) f.push_back(fh);
    const std::vector<double> t = time_interleaved(f, o_);
    std::vector<Result> res(f.size());
    for (size_t k = 0; k < f.size(); ++k) {
      res[k].time_us = t[k] * 1e6;
      res[k].algbw = total * sizeof(float) / t[k] / 1e9;
      res[k].busbw = res[k].algbw * factor;
      std::memset(r, 0, total * sizeof(float));
      if (k == 2) h->reset_counters();
      f[k]();  // once more, alone, to check its result
      long wrong = check(op, total);
      MPI_Allreduce(&wrong, &res[k].wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (k == 2) {
        long inter = static_cast<long>(h->link_counters().inter_node.total_sent());
        MPI_Allreduce(&inter, &res[k].inter_bytes, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      }
    }
    return res;
  }

  // "N node(s) x L rank(s), hierarchical on|off", or "" without --hierarchical.
  std::string layout() const {
    if (!h_) return "";
    return std::to_string(h_->num_nodes()) + " node(s) x " + std::to_string(h_->local_size()) +
           " rank(s), hierarchical " + (h_->hierarchical() ? "on" : "off (flat)");
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
  std::unique_ptr<zs::HierarchicalCommunicator> h_;
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
      "json", po::bool_switch(&o.json), "one JSON object per row instead of the table")(
      "hierarchical", po::bool_switch(&o.hierarchical),
      "also time HierarchicalCommunicator (node-local + cross-node steps)")(
      "fake-nodes", po::value(&o.fake_nodes)->default_value(o.fake_nodes),
      "with --hierarchical: K contiguous blocks as nodes; 0 real nodes; -1 ZS_FAKE_NODES")(
      "fit", po::bool_switch(&o.fit), "fit time = alpha + beta * bytes per op and implementation")(
      "fit-out", po::value(&o.fit_out), "write the first op's zeroshard fit into this links file")(
      "fit-class", po::value(&o.fit_class)->default_value(o.fit_class),
      "the link class --fit-out writes: intra_node or inter_node");
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
  ZS_CHECK(o.fit_class == "intra_node" || o.fit_class == "inter_node",
           zs::ErrorCode::kInvalidArgument,
           "bench_collectives: --fit-class '{}' is not one of intra_node, inter_node", o.fit_class);
  if (!o.fit_out.empty()) o.fit = true;
  o.ops.clear();
  std::stringstream ss(ops);
  for (std::string op; std::getline(ss, op, ',');) o.ops.push_back(op);
  return true;
}

// Writes one link class's alpha-beta into the links file, keeping what else it holds.
void write_fit(const Options& o, const std::string& op, int ranks, double alpha, double beta,
               const std::vector<double>& x) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (std::ifstream in(o.fit_out); in.good()) {
    try {
      in >> j;
    } catch (const nlohmann::json::exception&) {
      j = nlohmann::ordered_json::object();  // not JSON: replaced
    }
  }
  char host[256] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  j[o.fit_class] = {{"alpha_s", alpha},
                    {"beta_s_per_byte", beta},
                    {"fit", op + ", zeroshard (MpiCommunicator), alpha = smallest row's time, "
                                 "beta = least-squares slope over the larger half of the rows"},
                    {"ranks", ranks},
                    {"min_bytes_per_rank", x.empty() ? 0.0 : x.front()},
                    {"max_bytes_per_rank", x.empty() ? 0.0 : x.back()},
                    {"host", std::string(host, static_cast<size_t>(len))}};
  std::ofstream out(o.fit_out);
  out << j.dump(2) << "\n";
  ZS_CHECK(out.good(), zs::ErrorCode::kInvalidArgument, "bench_collectives: cannot write '{}'",
           o.fit_out);
  std::printf("# wrote %s of %s\n", o.fit_class.c_str(), o.fit_out.c_str());
}

void run(int argc, char** argv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  if (!parse(argc, argv, o, rank)) return;
  Bench b(o);
  const bool hier = o.hierarchical;
  const char* names[3] = {"zeroshard", "mpi", "hierarchical"};
  const int impls = hier ? 3 : 2;
  if (rank == 0 && !o.json) {
    std::printf(
        "# bench_collectives: %d ranks, fp32 sum, %d warm-up + %d timed iterations, "
        "median of per-iteration max over ranks%s%s\n",
        b.size(), o.warmup, o.iters, hier ? "; " : "", b.layout().c_str());
    std::printf("# %-14s %10s %12s %5s %5s | %-38s | %-38s", "", "", "", "", "",
                "            zeroshard", "            raw MPI");
    if (hier) std::printf(" | %-50s", "            hierarchical");
    std::printf("\n# %-14s %10s %12s %5s %5s | %10s %8s %8s %8s | %10s %8s %8s %8s", "op", "size",
                "count", "type", "redop", "time_us", "algbw", "busbw", "#wrong", "time_us", "algbw",
                "busbw", "#wrong");
    if (hier) {
      std::printf(" | %10s %8s %8s %8s %11s", "time_us", "algbw", "busbw", "#wrong", "inter_B");
    }
    std::printf("\n");
  }
  for (const auto& op : o.ops) {
    std::vector<double> x;                  // bytes per rank by the ring bound, per row
    std::vector<std::vector<double>> t(3);  // seconds, per implementation and row
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step) {
      const size_t total = b.total_count(bytes);
      const std::vector<Result> res = b.run(op, total);
      if (rank != 0) continue;
      const size_t sz = total * sizeof(float);
      const double n = b.size();
      x.push_back(sz * (n - 1) / n * (op == "all_reduce" ? 2 : 1));
      for (int k = 0; k < impls; ++k) t[k].push_back(res[k].time_us * 1e-6);
      if (o.json) {
        for (int k = 0; k < impls; ++k) {
          const Result& r = res[k];
          std::printf(
              "{\"op\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"impl\": \"%s\", "
              "\"time_us\": %.2f, \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f, "
              "\"wrong\": %ld",
              op.c_str(), sz, b.size(), names[k], r.time_us, r.algbw, r.busbw, r.wrong);
          if (r.inter_bytes >= 0) std::printf(", \"inter_node_bytes\": %ld", r.inter_bytes);
          std::printf("}\n");
        }
      } else {
        const char* redop = op == "all_gather" ? "none" : "sum";
        const Result& z = res[0];
        const Result& m = res[1];
        std::printf(
            "  %-14s %10s %12zu %5s %5s | %10.1f %8.2f %8.2f %8ld | %10.1f %8.2f %8.2f "
            "%8ld",
            op.c_str(), human(sz).c_str(), total, "float", redop, z.time_us, z.algbw, z.busbw,
            z.wrong, m.time_us, m.algbw, m.busbw, m.wrong);
        if (hier) {
          const Result& h = res[2];
          std::printf(" | %10.1f %8.2f %8.2f %8ld %11ld", h.time_us, h.algbw, h.busbw, h.wrong,
                      h.inter_bytes);
        }
        std::printf("\n");
      }
      std::fflush(stdout);
    }
    if (rank == 0 && o.fit) {
      for (int k = 0; k < impls; ++k) {
        const auto [alpha, beta] = fit_alpha_beta(x, t[k]);
        std::printf(
            "# fit %-14s %-12s alpha = %9.2f us  beta = %8.4f ns/B  (1/beta = %7.3f GB/s)\n",
            op.c_str(), names[k], alpha * 1e6, beta * 1e9, beta > 0 ? 1e-9 / beta : 0.0);
        if (k == 0 && !o.fit_out.empty() && op == o.ops.front()) {
          write_fit(o, op, b.size(), alpha, beta, x);
        }
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
