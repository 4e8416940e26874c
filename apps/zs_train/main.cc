// zs_train: trains zeroshard's decoder-only transformer, GPT-2 or Llama family (--family, the
// component flags), with the zeroshard engine under mpirun.
//   mpirun -np 2 zs_train                 (a byte-level GPT-2, ZeRO-3, bf16, the shipped corpus)
//   mpirun -np 4 zs_train --zero-stage 1 --dtype fp16 --steps 500 --json-log run.jsonl
//   mpirun -np 2 zs_train --family llama --kv-heads 2 --train-shards 'shards/train_*.bin'
// Rank 0 prints one line per step (with elapsed time and ETA), validation loss, peak memory per
// category (max over ranks), a generated sample, and a final `param_hash:` line; --json-log writes
// the same as JSON records (run_log.h). Messages start with `zs_train:`. Refused flags (a bad
// value, a shape the model refuses) print one message and every rank exits 2; other set-up errors
// (data, memory, checkpoints) exit 1; an error inside training that every rank agreed on (a failed
// save, or background checkpoint write: collectives/fail_together.h) is printed once and every rank
// exits 1; any other aborts the job (no rank is left waiting in a collective). run() is the list of
// the program's phases, each a function below in the order it calls them; run_report.h formats what
// rank 0 prints and logs.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "collectives/fail_together.h"
#include "collectives/flight_recorder.h"
#include "collectives/mpi_agreement.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "core/exact_sum.h"
#include "core/settings.h"
#include "data_source.h"
#include "kernel_report.h"
#include "link_meter.h"
#include "memory_check.h"
#include "model_description.h"
#include "models/gpt/gpt.h"
#include "nn/gemm_rate.h"
#include "nn/threads.h"
#include "node_layout.h"
#include "options.h"
#include "run_log.h"
#include "run_report.h"
#include "runtime/agreement.h"
#include "runtime/engine.h"
#include "runtime/param_init.h"

namespace zs::train {
namespace {

using Clock = std::chrono::steady_clock;

// The program's name, which starts its messages.
constexpr const char* kProgram = "zs_train";

// One set-up phase, run by every rank (collectives/fail_together.h): when any rank failed, the
// lowest failing rank prints its message and every rank returns false.
bool setup_phase(Communicator& comm, const std::function<void()>& work) {
  try {
    fail_together(comm, work);
    return true;
  } catch (const RankFailure& f) {
    if (f.rank() == comm.rank())
      std::fprintf(stderr, "%s: error: %s\n", kProgram, f.cause().c_str());
    return false;
  }
}

std::vector<double> peak_memory_max(Engine& engine, Communicator& comm) {
  std::vector<double> v(kNumMemCategories);
  for (int c = 0; c < kNumMemCategories; ++c) {
    v[c] = static_cast<double>(engine.tracker().peak(static_cast<MemCategory>(c)));
  }
  v.push_back(static_cast<double>(engine.tracker().peak_total()));
  comm.all_reduce(v.data(), v.data(), v.size(), DType::kF64, ReduceOp::kMax);
  return v;
}

// Every rank's process peak resident set (getrusage's ru_maxrss, the kernel's VmHWM), in bytes,
// indexed by rank: what the machine saw, beside the tracker's model state. Collective.
std::vector<double> peak_rss_per_rank(Communicator& comm) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double mine = static_cast<double>(u.ru_maxrss) * 1024.0;  // KiB on Linux
  std::vector<double> all(static_cast<size_t>(comm.size()));
  comm.all_gather(&mine, all.data(), 1, DType::kF64);
  return all;
}

// check_agreement over the data's size and hash; when they differ, again with each rank's
// absolute path, so that the message names the files. Collective.
void check_same_data(Communicator& comm, const Dataset& data, const DataSource& source) {
  const std::string content =
      fmt::format("{} {}, xxh3 {:016x}", data.train_tokens() + data.val_tokens(), data.unit(),
                  data.content_hash());
  const std::string flag = source.shards() ? "--train-shards" : "--data";
  try {
    const Setting s{flag, content};
    check_agreement(comm, std::span(&s, 1), "data");
  } catch (const Error&) {
    std::error_code ec;
    const std::string path = source.shards() ? source.name() : source.text;
    const std::string where = std::filesystem::absolute(path, ec).string();
    const Setting s{flag, fmt::format("{} ({})", where, content)};
    check_agreement(comm, std::span(&s, 1), "ranks read different training text");
  }
}

// [Note: validation chunks] A validation fills its sequences a chunk of micro-batches at a time
// (val_chunk(): at most 4 MiB of tokens, at least one micro-batch), so that memory stays bounded
// however large --eval-batches is: one buffer of the whole set took 53 MB at 100,000 micro-batches
// of 4 x 33 tokens, and batch x (context + 1) x 4 bytes per micro-batch in general. The losses are
// added in the same micro-batch order as from one buffer: the same value, bit for bit.
int val_chunk(const TrainOptions& o) {
  constexpr int64_t kChunkBytes = int64_t{4} << 20;
  const int64_t per_mb = static_cast<int64_t>(o.model.run.batch) * (o.model.arch.context + 1) *
                         static_cast<int64_t>(sizeof(int32_t));
  return static_cast<int>(std::clamp<int64_t>(kChunkBytes / per_mb, 1, o.eval_batches));
}

// Forwards micro-batches [0, n) of the validation set on this rank, a chunk at a time, and calls
// add(m, loss) for each in order. `total`: Dataset::fill_val's count of the whole set.
template <typename Add>
void forward_val(Engine& engine, nn::GptModelBase& model, const Dataset& data,
                 const TrainOptions& o, Communicator& comm, std::vector<int32_t>& tokens, int n,
                 int64_t total, Add&& add) {
  const int chunk = val_chunk(o);
  for (int first = 0; first < n; first += chunk) {
    const int k = std::min(chunk, n - first);
    data.fill_val(k, comm.size(), comm.rank(), o.model.run.batch, tokens, total, first);
    model.set_tokens(tokens);
    for (int m = 0; m < k; ++m) {
      model.load_micro_batch(m);
      engine.forward();
      add(first + m, model.loss());
    }
  }
}

// [Note: world-invariant reduction]: --eval-batches E micro-batches over all ranks, each rank
// taking global micro-batches r, r + W, ... (ceil(E / W) forwards on every rank: those past E are
// computed and not counted), their losses summed exactly: the same value at any world size.
double invariant_validation_loss(Engine& engine, nn::GptModelBase& model, const Dataset& data,
                                 const TrainOptions& o, Communicator& comm,
                                 std::vector<int32_t>& tokens) {
  const int W = comm.size(), E = o.eval_batches, per_rank = (E + W - 1) / W;
  ExactSum sum;
  forward_val(engine, model, data, o, comm, tokens, per_rank,
              static_cast<int64_t>(E) * o.model.run.batch, [&](int m, double loss) {
                if (m * W + comm.rank() < E) sum.add(loss);
              });
  std::vector<double> words(ExactSum::kWords);
  sum.to_words(words.data());
  comm.all_reduce(words.data(), words.data(), words.size(), DType::kF64, ReduceOp::kSum);
  return ExactSum::from_words(words.data()).to_double() / E;
}

double validation_loss(Engine& engine, nn::GptModelBase& model, const Dataset& data,
                       const TrainOptions& o, Communicator& comm, std::vector<int32_t>& tokens) {
  if (o.engine.world_invariant)
    return invariant_validation_loss(engine, model, data, o, comm, tokens);
  const int E = o.eval_batches;
  double sum = 0.0;
  forward_val(engine, model, data, o, comm, tokens, E,
              static_cast<int64_t>(E) * comm.size() * o.model.run.batch,
              [&](int, double loss) { sum += loss; });
  sum /= E;
  comm.all_reduce(&sum, &sum, 1, DType::kF64, ReduceOp::kAvg);
  return sum;
}

// Sampling with temperature 0.8 from a generator seeded identically on every rank: all ranks
// draw the same tokens and take part in every (collective) forward. Returns the prompt's tokens
// (Dataset::sample_prompt) and the generated ones.
std::vector<int32_t> generate(Engine& engine, nn::GptModelBase& model, const Dataset& data,
                              const TrainOptions& o, uint64_t& rng) {
  std::vector<int32_t> ctx = data.sample_prompt(o.sample_prompt);
  const int T = o.model.arch.context;
  for (int i = 0; i < o.sample_tokens; ++i) {
    const int n = std::min<int>(static_cast<int>(ctx.size()), T);
    model.set_inference_input(ctx.data() + ctx.size() - n, n);
    engine.forward();
    std::span<const float> logits = model.last_logits();
    double mx = -1e30;
    for (float l : logits) mx = std::max(mx, static_cast<double>(l));
    std::vector<double> p(logits.size());
    double z = 0.0;
    for (size_t k = 0; k < logits.size(); ++k) z += p[k] = std::exp((logits[k] - mx) / 0.8);
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(rng >> 11) / 9007199254740992.0 * z;
    size_t pick = 0;
    while (pick + 1 < p.size() && u >= p[pick]) u -= p[pick++];
    ctx.push_back(static_cast<int32_t>(pick));
  }
  return ctx;
}

// The sample as rank 0 prints it: text for bytes, the token ids for token shards (no
// detokenizer).
std::string sample_text(const Dataset& data, const std::vector<int32_t>& tokens) {
  if (data.text()) return std::string(tokens.begin(), tokens.end());
  return fmt::format("{}", fmt::join(tokens, " "));
}

std::vector<std::string> command_line(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

// ---- The run's phases, in the order run() calls them ----

// The run's state, made by the set-up phases and read by the later ones. The members are
// destroyed in reverse order: the engine's buffers come from the backend's allocator and go
// first; --save-dir's writer lock is held until the end.
struct Run {
  explicit Run(TrainOptions& options) : o(options) {}
  TrainOptions& o;
  MemoryTracker tracker;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Backend> backend;
  nn::GptModelBase* model = nullptr;
  std::unique_ptr<Engine> engine;
  nlohmann::json kernels;  // kernel_report()
  TrainerState state;
  std::string mjson;  // model_description(o)
  RunLog json;        // rank 0's --json-log; disabled elsewhere
  SaveDir save_dir;   // holds --save-dir's writer lock until the run ends
  // --save-async's saver (its snapshot and background writer); null without the flag.
  std::unique_ptr<AsyncCheckpointSaver> saver;
  MemoryTier memory;             // --save-memory-every's directory; inactive without it
  int64_t tokens_per_step = 0;   // over all ranks
  double init_s = 0.0;           // the engine's construction ([Note: start-up lines])
  int64_t init_drawn = 0;        // initial values drawn on this rank
  int64_t pause_after_step = 0;  // ZS_TEST_PAUSE_AFTER_STEP (core/settings.h); 0: none
  int64_t pause_at_resume = 0;   // ZS_TEST_PAUSE_AT_RESUME (core/settings.h); 0: none
};

// Parses and checks the flags and paths on every rank. False: refused (one message printed);
// `parsed` stays empty after --help.
bool read_options(Communicator& comm, int argc, char** argv, std::optional<TrainOptions>& parsed) {
  const bool root = comm.rank() == 0;
  return setup_phase(comm, [&] {
    parsed = parse_options(argc, argv, root);
    if (parsed) resolve_world_size(*parsed, comm.size());
    if (parsed) check_paths(*parsed, root);
    // Only rank 0 writes the log; the others agree on its verdict.
    if (parsed && root) check_log_path(parsed->json_log, parsed->json_log_mode);
  });
}

// Before any work: the ranks agree on every option, the watchdog starts, the memory the run needs
// is checked against the node's, and rank 0 prints the parser's notes. False: refused.
bool check_before_work(Communicator& comm, const TrainOptions& o) {
  // Run-wide agreement (runtime/agreement.h, docs/reliability.md): every option's final value,
  // compared across ranks before any work; a difference is named with both values.
  if (!setup_phase(comm, [&] {
        std::vector<Setting> settings;
        for (const auto& [name, value] : o.config.items())
          settings.push_back({"--" + name, value.dump()});
        check_agreement(comm, settings, "options");
      }))
    return false;
  // --watchdog-timeout: the one setting of the watchdog; communicators made later keep it.
  start_watchdog(o.watchdog_timeout_s, comm.rank(), comm.size());
  // Memory before work (--memory-check): the plan the engine will allocate from, and the text,
  // against what each node has available; each rank checks its node.
  if (!setup_phase(comm, [&] {
        const RunMemory need = plan_run_memory(o, comm.size());
        const int local = LaunchEnvironment::from_environment().local_size.value_or(comm.size());
        if (o.memory_check) check_memory(need, local);
      }))
    return false;
  if (comm.rank() == 0) {
    for (const std::string& n : o.notes)
      std::fprintf(stderr, "%s: note: %s\n", kProgram, n.c_str());
  }
  return true;
}

// [Note: start-up lines] Rank 0's lines about the start-up: while the engine draws the initial
// parameters, "init: 5.0 s, 1.23 G values drawn on this rank" at most every 5 s (none for a
// shorter one); then "init: 12.3 s (6.74 G parameters, 3.37 G on this rank)": the engine's
// construction (its buffers and this rank's draws); after the banner, before the first step,
// "start-up: 14.0 s since launch".
class InitProgress {
 public:
  InitProgress(bool enabled, Clock::time_point start, int64_t drawn0) {
    if (!enabled) return;
    thread_ = std::thread([this, start, drawn0] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::seconds(5), [this] { return done_; })) {
        std::printf("init: %.1f s, %.2f G values drawn on this rank\n",
                    std::chrono::duration<double>(Clock::now() - start).count(),
                    static_cast<double>(param_values_drawn() - drawn0) / 1e9);
        std::fflush(stdout);
      }
    });
  }
  ~InitProgress() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  InitProgress(const InitProgress&) = delete;
  InitProgress& operator=(const InitProgress&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Rank 0, on the CPU, before the engine allocates: the fp32 and bf16 GEMM rates at the model's
// FFN product (a micro-batch's tokens, at most 2048, x width x FFN width) on the model's team, so
// that the banner says when --dtype chose the slower of the two here (nn/gemm_rate.h).
nlohmann::json gemm_rates(const TrainOptions& o, const Run& r) {
  nn::ThreadScope team(r.model->threads());
  const int64_t tokens =
      std::min<int64_t>(2048, static_cast<int64_t>(o.model.run.batch) * o.model.arch.context);
  const nn::GemmRates g =
      nn::measure_gemm_rates(tokens, o.model.arch.width, o.model.arch.ffn_width());
  const std::string chosen(dtype_name(o.engine.precision.param_dtype));
  return {{"m", g.m},
          {"k", g.k},
          {"n", g.n},
          {"threads", g.threads},
          {"fp32_gflops", g.fp32_gflops},
          {"bf16_gflops", g.bf16_gflops},
          {"chosen_is_slower", nn::slower_dtype(g, chosen)},
          {"text", nn::describe_gemm_rates(g, chosen)}};
}

// The kernels, the text, the device backend with its model, and the engine. False: refused.
bool build_engine(MpiCommunicator& comm, Run& r) {
  TrainOptions& o = r.o;
  if (!setup_phase(comm, [&] {
        r.kernels = kernel_report(o.engine.precision.param_dtype, o.device);
        r.data = open_dataset(o.data_source(), o.model.arch.context, o.model.arch.vocab);
        r.backend =
            make_backend(o.device, o.model, comm, r.tracker, o.collectives == "hierarchical");
        r.model = &r.backend->model();
        // CPU: the same core budget as the model; CUDA: the host cores of this rank.
        o.engine.optimizer_threads = o.device == "cpu" ? r.model->threads() : nn::default_threads();
        if (o.device == "cpu" && comm.rank() == 0) r.kernels["gemm_rates"] = gemm_rates(o, r);
      }))
    return false;
  // Every rank must train on the same data: a relative --data read from different working
  // directories, or node-local copies that differ, are refused here.
  if (!setup_phase(comm, [&] { check_same_data(comm, *r.data, o.data_source()); })) return false;
  Communicator& ecomm = r.backend->engine_comm();
  if (o.engine.zeropp.hpz_partition_size > 1 || o.engine.zeropp.quantized_gradients) {
    const char* what = o.engine.zeropp.quantized_gradients ? "--zero-quantized-gradients (qgZ)"
                                                           : "--zero-hpz-partition-size (hpZ)";
    if (!setup_phase(comm, [&] { o.engine.node_size = block_node_size(comm, what); })) return false;
  }
  // The engine's construction draws the initial parameters (runtime/param_init.h): timed, with
  // rank 0's progress lines while it runs. A frozen base read from files is not drawn first.
  o.engine.frozen.draw_initial =
      o.checkpoint.init_from_hf.empty() && o.checkpoint.init_from.empty();
  const auto t0 = Clock::now();
  const int64_t drawn0 = param_values_drawn();
  bool ok = false;
  {
    InitProgress progress(comm.rank() == 0, t0, drawn0);
    ok = setup_phase(comm, [&] {
      r.engine = std::make_unique<Engine>(*r.model, ecomm, o.engine, &r.tracker, r.backend->ops());
    });
  }
  r.init_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.init_drawn = param_values_drawn() - drawn0;
  return ok;
}

// The checkpoint start (resume, initial weights, --save-dir's claim: checkpointing.h) and the run
// log. False: refused.
bool start_checkpoints(Communicator& comm, Run& r, Clock::time_point start) {
  const TrainOptions& o = r.o;
  r.state.rng = o.engine.seed ^ 0x5eedull;
  r.state.invariant_micro_batches = o.engine.world_invariant ? o.global_micro_batches : 0;
  r.mjson = model_description(o);
  return setup_phase(comm, [&] {
    r.save_dir = start_run(*r.engine, comm, o.checkpoint, o.model, r.mjson, r.state, r.memory);
    r.saver = make_async_saver(*r.engine, comm, o.checkpoint);
    if (comm.rank() == 0 && !o.json_log.empty())
      r.json = RunLog(o.json_log, o.json_log_mode, start);
  });
}

// " in shard groups of 2 ranks x 2 replicas", or nothing without hybrid sharding.
std::string describe_shard_groups(const Engine& engine, int world) {
  if (engine.shard_group_size() >= world) return "";
  return fmt::format(" in shard groups of {} ranks x {} replicas", engine.shard_group_size(),
                     world / engine.shard_group_size());
}

// The "collectives: ..." line's text: the algorithms and the node layout.
std::string describe_collectives(const HierarchicalCommunicator& h, const std::string& flag) {
  const std::string layout =
      fmt::format("{} node{} x {} rank{}", h.num_nodes(), h.num_nodes() == 1 ? "" : "s",
                  h.local_size(), h.local_size() == 1 ? "" : "s");
  if (h.hierarchical()) return fmt::format("hierarchical ({})", layout);
  if (flag == "flat") return fmt::format("flat (--collectives flat; {})", layout);
  return fmt::format("flat ({}: two levels need several nodes of more than one rank each)", layout);
}

// The components after the dimensions in the banner: nothing for GPT-2's (the banner stays as it
// was), else "; llama: rmsnorm, rotary (theta 10000), swiglu, FFN 1024, 2 KV heads, biases
// qkv off, proj off, mlp off" (", head dim N" and ", q/k norms" after the KV heads when set,
// ", tied embeddings" after it all when tied; GPT-2's: "; tied embeddings" alone).
std::string describe_components(const nn::GptArchitecture& a) {
  const char* tied = a.tied_embeddings ? ", tied embeddings" : "";
  if (a.family() == "gpt-2" && a.ffn_width() == 4 * a.width)
    return a.tied_embeddings ? "; tied embeddings" : "";
  auto on = [](bool b) { return b ? "on" : "off"; };
  const std::string rotary = a.positions == nn::PositionKind::kRotary
                                 ? fmt::format(" (theta {})", a.rope_theta)
                                 : std::string();
  const std::string head_dim =
      a.head_dim_override > 0 ? fmt::format(", head dim {}", a.head_dim()) : std::string();
  return fmt::format(
      "; {}: {}, {}{}, {}, FFN {}, {} KV heads{}{}, biases qkv {}, proj {}, mlp {}{}", a.family(),
      nn::norm_kind_name(a.norm), nn::position_kind_name(a.positions), rotary,
      nn::mlp_kind_name(a.mlp), a.ffn_width(), a.kv_heads_or_heads(), head_dim,
      a.qk_norm ? ", q/k norms" : "", on(a.qkv_bias), on(a.proj_bias), on(a.mlp_bias), tied);
}

// Rank 0's lines before the first step: the kernel paths, the run, the collectives.
void print_banner(const Run& r, int W) {
  const TrainOptions& o = r.o;
  const Engine& engine = *r.engine;
  std::printf("%s", kernel_report_text(r.kernels).c_str());
  if (r.kernels.contains("gemm_rates"))
    std::printf("%s\n", r.kernels["gemm_rates"]["text"].get<std::string>().c_str());
  std::printf(
      "zeroshard %s: %d ranks on %s, ZeRO-%d%s, %s compute, %s grads, %lld trainable "
      "params%s (%d layers, width %d, %d heads, context %d%s), %d x %d sequences per rank per "
      "step, %d threads per rank, data %s (%lld train / %lld val %s)\n",
      kProgram, W, r.backend->device_name().c_str(), static_cast<int>(o.engine.stage),
      describe_shard_groups(engine, W).c_str(),
      std::string(dtype_name(o.engine.precision.param_dtype)).c_str(),
      std::string(dtype_name(o.engine.precision.grad_dtype)).c_str(),
      static_cast<long long>(engine.num_params()),
      engine.num_frozen_params() > 0
          ? fmt::format(" + {} frozen ({})", engine.num_frozen_params(),
                        dtype_name(o.engine.frozen.storage_or(o.engine.precision.param_dtype)))
                .c_str()
          : "",
      o.model.arch.layers, o.model.arch.width, o.model.arch.heads, o.model.arch.context,
      describe_components(o.model.arch).c_str(), o.engine.micro_batches, o.model.run.batch,
      r.model->threads(), o.data_source().name().c_str(),
      static_cast<long long>(r.data->train_tokens()), static_cast<long long>(r.data->val_tokens()),
      r.data->unit());
  if (const HierarchicalCommunicator* h = r.backend->hierarchical()) {
    std::printf("collectives: %s\n", describe_collectives(*h, o.collectives).c_str());
  }
  if (o.engine.optimizer.kind == OptimizerKind::kMuon) {
    // [Note: Muon parameters]: the rule, and what it chose in this model.
    int64_t matrices = 0, muon = 0;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      for (const ParamSpec& p : engine.param_specs(u)) {
        if (!p.trainable || p.tied() ||
            !muon_param(o.engine.optimizer, engine.unit_name(u), p.shape))
          continue;
        ++matrices;
        muon += p.numel();
      }
    }
    std::printf("optimizer: %s; here %lld matrices, %lld params by Muon, %lld by AdamW\n",
                optimizer_rules(o.engine.optimizer).c_str(), static_cast<long long>(matrices),
                static_cast<long long>(muon), static_cast<long long>(engine.num_params() - muon));
  }
  if (o.engine.world_invariant)
    std::printf(
        "world-invariant: %d micro-batches per step over all ranks (%d per rank here), each "
        "reduced over the ranks and summed in one fixed tree: the same bits at any power-of-two "
        "world size with --global-micro-batches %d and --threads %d\n",
        o.global_micro_batches, o.engine.micro_batches, o.global_micro_batches, r.model->threads());
  std::fflush(stdout);
}

// The log's "header" record: the build, the machine, the run's size and every option.
void write_header(Run& r, int W, const std::vector<std::string>& args,
                  std::chrono::system_clock::time_point start_wall) {
  const TrainOptions& o = r.o;
  nlohmann::ordered_json h = build_info();
  h["start_time"] = iso8601_utc(start_wall);
  h["world_size"] = W;
  h["threads"] = r.model->threads();
  h["device"] = o.device;
  h["gpu"] = o.device == "cpu" ? "none" : r.backend->device_name();
  h["cpu"] = r.kernels.at("cpu");
  h["cpu_features"] = r.kernels.at("features");
  h["kernels"] = nlohmann::ordered_json::parse(r.kernels.dump());
  h["params"] = r.engine->num_params();
  h["frozen_params"] = r.engine->num_frozen_params();
  h["collectives"] = r.backend->hierarchical() && r.backend->hierarchical()->hierarchical()
                         ? "hierarchical"
                         : "flat";
  h["tokens_per_step"] = r.tokens_per_step;
  h["world_invariant"] = o.engine.world_invariant;
  h["global_micro_batches"] = W * o.engine.micro_batches;
  h["resumed_at_step"] = r.state.step;
  h["command_line"] = args;
  h["config"] = o.config;
  r.json.write("header", h);
}

// The training loop's running figures, for the step reports and the closing ones.
struct LoopTotals {
  double tok_s_sum = 0.0, ms_sum = 0.0, last_loss = 0.0, last_val = NAN;
  std::vector<double> step_ms;  // steps after the first, for the median
  int64_t timed = 0;
  StepBytes step_bytes;  // the last step's
  std::vector<int32_t> tokens, val_tokens;
};

// Optimizer step `s` (the loop began at `first`), and the validation loss when due: advances the
// trainer state and the totals. Collective.
StepReport train_step(Run& r, Communicator& comm, LinkMeter& meter, int64_t s, int64_t first,
                      LoopTotals& t) {
  const TrainOptions& o = r.o;
  r.data->fill_train(s, o.engine.micro_batches, comm.size(), comm.rank(), o.model.run.batch,
                     o.engine.seed, t.tokens);
  r.model->set_tokens(t.tokens);
  meter.start();
  const auto t0 = Clock::now();
  StepReport rep;
  rep.stats = r.engine->step();
  r.backend->synchronize();  // a device step ends when its last kernel does
  rep.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  t.step_bytes = rep.bytes = meter.stop();
  r.state.step = s + 1;
  r.state.data_cursor = s + 1;
  rep.step = s + 1;
  rep.steps = o.steps;
  rep.tok_s = r.tokens_per_step / (rep.ms / 1e3);
  if (s > first) {  // the first step pays one-time costs (page faults, primitive set-up)
    t.tok_s_sum += rep.tok_s;
    t.ms_sum += rep.ms;
    t.step_ms.push_back(rep.ms);
    ++t.timed;
  }
  t.last_loss = rep.stats.loss;
  rep.evaluated = (o.eval_every > 0 && (s + 1) % o.eval_every == 0) || s + 1 == o.steps;
  if (rep.evaluated)
    t.last_val = validation_loss(*r.engine, *r.model, *r.data, o, comm, t.val_tokens);
  rep.val_loss = t.last_val;
  rep.scale_now = r.engine->loss_scaler_state().scale;
  rep.mem_peak_bytes = static_cast<double>(r.engine->tracker().peak_total());
  return rep;
}

// The log's "save" records of the saves just committed.
void log_saves(Run& r, const std::vector<SaveRecord>& saves) {
  if (!r.json.enabled()) return;
  for (const SaveRecord& s : saves) r.json.write("save", save_record_json(s));
}

// The test hooks' pause (ZS_TEST_PAUSE_AFTER_STEP, ZS_TEST_PAUSE_AT_RESUME: core/settings.h):
// once every rank is there, rank 0 prints `line` and every rank sleeps until it is killed.
// Collective.
[[noreturn]] void pause_for_test(Communicator& comm, const std::string& line) {
  comm.barrier();
  if (comm.rank() == 0) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// ZS_TEST_PAUSE_AT_RESUME (tests only), in a run that resumed from step `step`: pauses before the
// first step, the first time only. Why once: zs_run gives every relaunch the same environment, and
// the relaunch after the kill resumes from the same step (no step was taken); it must run to the
// end. Rank 0 leaves DIR/.test-paused-at-resume before pausing; a run that finds it goes on.
// Nothing without --save-dir. Collective.
void pause_at_resume_for_test(Communicator& comm, const std::string& save_dir, int64_t step) {
  if (save_dir.empty()) return;
  double pause = 0.0;
  if (comm.rank() == 0) {
    const std::filesystem::path marker = std::filesystem::path(save_dir) / ".test-paused-at-resume";
    std::error_code ec;
    if (!std::filesystem::exists(marker, ec)) {
      if (std::FILE* f = std::fopen(marker.c_str(), "w")) {
        std::fprintf(f, "%lld\n", static_cast<long long>(step));
        pause = std::fclose(f) == 0 ? 1.0 : 0.0;
      }
      if (pause == 0.0)
        std::fprintf(stderr, "zs_train: ZS_TEST_PAUSE_AT_RESUME: cannot write %s: not pausing\n",
                     marker.c_str());
    }
  }
  comm.all_reduce(&pause, &pause, 1, DType::kF64, ReduceOp::kMax);
  if (pause > 0.0)
    pause_for_test(
        comm, fmt::format("paused after resuming from step {} (ZS_TEST_PAUSE_AT_RESUME)", step));
}

// The steps from the trainer state's to --steps: each reported (rank 0's line, the log's record)
// and saved when due. Collective.
LoopTotals train(Run& r, Communicator& comm, Clock::time_point start) {
  const TrainOptions& o = r.o;
  LoopTotals t;
  t.step_ms.reserve(static_cast<size_t>(o.steps));
  LinkMeter meter(*r.engine, r.backend->engine_comm(), r.backend->hierarchical());
  const int64_t first = r.state.step;
  if (first > 0 && first == r.pause_at_resume)
    pause_at_resume_for_test(comm, o.checkpoint.save_dir, first);
  const auto loop_start = Clock::now();
  for (int64_t s = first; s < o.steps; ++s) {
    StepReport rep = train_step(r, comm, meter, s, first, t);
    // ETA: this run's mean wall time per step (evaluation included) times the steps left.
    const auto now = Clock::now();
    rep.elapsed_s = std::chrono::duration<double>(now - start).count();
    rep.eta_s = std::chrono::duration<double>(now - loop_start).count() /
                static_cast<double>(s + 1 - first) * static_cast<double>(o.steps - s - 1);
    if (comm.rank() == 0 && ((s + 1) % o.log_every == 0 || s == first || s + 1 == o.steps))
      print_step_line(rep);
    if (r.json.enabled()) r.json.write("step", step_record(rep));
    // --save-async: the write in flight is committed once every rank's has ended.
    log_saves(r, commit_saves(comm, o.checkpoint, r.save_dir, r.saver.get(), /*wait=*/false));
    log_saves(r, save_if_due(*r.engine, comm, o.checkpoint, r.mjson, r.state, r.save_dir,
                             s + 1 == o.steps, r.saver.get()));
    log_saves(r, save_memory_if_due(*r.engine, comm, o.checkpoint, r.mjson, r.state, r.memory,
                                    s + 1 == o.steps));
    if (first == 0 && s + 1 == r.pause_after_step)
      pause_for_test(comm, fmt::format("paused after step {} (ZS_TEST_PAUSE_AFTER_STEP)", s + 1));
  }
  // The run ends with every checkpoint committed; the memory tier is then superseded.
  log_saves(r, commit_saves(comm, o.checkpoint, r.save_dir, r.saver.get(), /*wait=*/true));
  if (r.memory.active()) {
    r.memory.remove();
    if (comm.rank() == 0) std::printf("memory tier: removed %s\n", r.memory.dir().c_str());
  }
  return t;
}

// The slowest rank's median of `step_ms` (as the PyTorch peer script reports it). Collective.
double slowest_median(Communicator& comm, std::vector<double>& step_ms) {
  double median_ms = 0.0;
  if (!step_ms.empty()) {
    std::nth_element(step_ms.begin(), step_ms.begin() + step_ms.size() / 2, step_ms.end());
    median_ms = step_ms[step_ms.size() / 2];
  }
  comm.all_reduce(&median_ms, &median_ms, 1, DType::kF64, ReduceOp::kMax);
  return median_ms;
}

// Bytes sent in the last step: the most any rank sent, and by link class all ranks together
// (-1: unknown on some rank). Collective.
void last_step_bytes(Communicator& comm, const StepBytes& b, RunTotals& out) {
  double comm_max = static_cast<double>(b.total);
  comm.all_reduce(&comm_max, &comm_max, 1, DType::kF64, ReduceOp::kMax);
  const bool classed = b.intra >= 0;
  double link_sum[3] = {static_cast<double>(b.intra), static_cast<double>(b.inter),
                        classed ? 0.0 : 1.0};
  comm.all_reduce(link_sum, link_sum, 3, DType::kF64, ReduceOp::kSum);
  if (link_sum[2] > 0) link_sum[0] = link_sum[1] = -1;
  out.comm_max = comm_max;
  out.link_intra = link_sum[0];
  out.link_inter = link_sum[1];
}

// Model FLOPs per token, PaLM's count over the model's real parameters (any family: SwiGLU's three
// matrices, grouped-query attention's smaller k/v projections and the untied head are in them):
// 6 per trainable parameter (forward + backward), 4 per frozen one (forward and the input
// gradient; no weight gradient), plus attention's scores and weighted sum, 12 * layers * context
// * heads * head_dim (every query head attends; the key/value heads GQA shares change no product).
// Activation recomputation is not counted.
double model_flops_per_token(const nn::GptArchitecture& a, int64_t trainable, int64_t frozen) {
  const double attention =
      12.0 * a.layers * static_cast<double>(a.context) * a.heads * a.head_dim();
  return 6.0 * static_cast<double>(trainable) + 4.0 * static_cast<double>(frozen) + attention;
}

// After the last step: the closing figures, the sample, the exports and the parameters' hash, on
// every rank. Collective.
RunTotals finish(Run& r, Communicator& comm, LoopTotals& t) {
  const TrainOptions& o = r.o;
  RunTotals out;
  out.world = comm.size();
  out.peaks = peak_memory_max(*r.engine, comm);
  out.median_ms = slowest_median(comm, t.step_ms);
  last_step_bytes(comm, t.step_bytes, out);
  out.mean_ms = t.timed ? t.ms_sum / t.timed : 0.0;
  out.mean_tok_s = t.timed ? t.tok_s_sum / t.timed : 0.0;
  const double flops_per_token =
      model_flops_per_token(o.model.arch, r.engine->num_params(), r.engine->num_frozen_params());
  out.median_tok_s = out.median_ms > 0 ? r.tokens_per_step / (out.median_ms / 1e3) : 0.0;
  out.model_tflops = flops_per_token * out.median_tok_s / 1e12;
  out.peak_tflops = o.peak_tflops > 0 ? o.peak_tflops : r.backend->peak_tflops();
  if (o.sample_tokens > 0) {
    out.sample = sample_text(*r.data, generate(*r.engine, *r.model, *r.data, o, r.state.rng));
    out.sample_is_tokens = !r.data->text();
  }
  export_if_asked(*r.engine, comm, o.checkpoint, o.model);
  out.hash = param_hash_hex(r.engine->param_hash());
  out.rss_peaks = peak_rss_per_rank(comm);  // after the exports: they count too
  return out;
}

// The log's "final" record, and the log closed.
void write_final(Run& r, const LoopTotals& t, const RunTotals& f) {
  const TrainOptions& o = r.o;
  nlohmann::ordered_json mem;
  for (int c = 0; c < kNumMemCategories; ++c) {
    mem[std::string(mem_category_name(static_cast<MemCategory>(c)))] = f.peaks[c];
  }
  mem["total"] = f.peaks.back();
  const double peak = f.peak_tflops;
  nlohmann::ordered_json j = {{"final", true},
                              {"params", r.engine->num_params()},
                              {"frozen_params", r.engine->num_frozen_params()},
                              {"world_size", f.world},
                              {"stage", static_cast<int>(o.engine.stage)},
                              {"dtype", std::string(dtype_name(o.engine.precision.param_dtype))},
                              {"steps", o.steps},
                              {"loss", t.last_loss},
                              {"val_loss", t.last_val},
                              {"tokens_per_s", f.mean_tok_s},
                              {"step_ms", f.mean_ms},
                              {"median_step_ms", f.median_ms},
                              {"median_tokens_per_s", f.median_tok_s},
                              {"device", r.backend->device_name()},
                              {"model_tflops", f.model_tflops},
                              {"mfu", peak > 0 ? f.model_tflops / f.world / peak : 0.0},
                              {"memory_bytes", mem},
                              {"peak_rss_bytes_per_rank", f.rss_peaks},
                              {"comm_bytes_per_step", f.comm_max},
                              {"comm_bytes_intra_all_ranks", f.link_intra},
                              {"comm_bytes_inter_all_ranks", f.link_inter},
                              {"shard_group_size", r.engine->shard_group_size()},
                              {"collectives", o.collectives},
                              {"param_hash", f.hash},
                              {"kernels", nlohmann::ordered_json::parse(r.kernels.dump())},
                              {"sample", f.sample}};
  r.json.write("final", j);
  r.json.close();
}

// The program: its phases in order. Returns the exit code of refused flags (2), of another refusal
// before work (1), or of a finished run or --help (0); an error inside training is thrown.
int run(int argc, char** argv, MpiCommunicator& comm, Clock::time_point start) {
  const auto start_wall = std::chrono::system_clock::now();
  std::optional<TrainOptions> parsed;
  if (!read_options(comm, argc, argv, parsed)) return 2;
  if (!parsed) return 0;  // --help
  if (!check_before_work(comm, *parsed)) return 1;
  Run r(*parsed);
  const Settings settings = Settings::from_environment();
  r.pause_after_step = settings.test_pause_after_step;
  r.pause_at_resume = settings.test_pause_at_resume;
  if (!build_engine(comm, r)) return 1;
  if (!start_checkpoints(comm, r, start)) return 1;
  const int W = comm.size();
  r.tokens_per_step = static_cast<int64_t>(W) * r.o.engine.micro_batches * r.o.model.run.batch *
                      r.o.model.arch.context;
  if (comm.rank() == 0) {
    std::printf("init: %.1f s (%.2f G parameters, %.2f G on this rank)\n", r.init_s,
                static_cast<double>(r.engine->num_params() + r.engine->num_frozen_params()) / 1e9,
                static_cast<double>(r.init_drawn) / 1e9);
    print_banner(r, W);
    std::printf("start-up: %.1f s since launch\n",
                std::chrono::duration<double>(Clock::now() - start).count());
    std::fflush(stdout);
  }
  if (r.json.enabled()) write_header(r, W, command_line(argc, argv), start_wall);
  LoopTotals totals = train(r, comm, start);
  const RunTotals closing = finish(r, comm, totals);
  if (comm.rank() == 0) {
    print_run_totals(closing);
    if (r.json.enabled()) write_final(r, totals, closing);
  }
  return 0;
}

}  // namespace
}  // namespace zs::train

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  // The environment settings (core/settings.h) first: a bad value fails every rank together and
  // the lowest failing rank says why (no abort, no hang). Then the same values on every rank,
  // before any communicator: a rank with another protocol setting would hang in the first
  // collective (every rank fails with the same message; rank 0 says it).
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  zs::Settings settings;
  try {
    zs::fail_together(MPI_COMM_WORLD, [&] { settings = zs::Settings::from_environment(); });
    zs::fail_together(MPI_COMM_WORLD,
                      [&] { zs::check_settings_agreement(MPI_COMM_WORLD, settings); });
  } catch (const zs::RankFailure& f) {
    if (rank == f.rank())
      std::fprintf(stderr, "%s: error: %s\n", zs::train::kProgram, f.cause().c_str());
    MPI_Finalize();
    return 1;
  }
  int rc = 1;
  {
    std::unique_ptr<zs::MpiCommunicator> comm;
    try {
      // The collectives' watchdog is set once, by run() from --watchdog-timeout (default
      // ZS_WATCHDOG_S, else 300 s; 0: off), for every communicator: none starts it here.
      auto comm_options = zs::MpiCommunicatorOptions::from_settings(settings);
      comm_options.watchdog_timeout_s = 0;
      comm = zs::MpiCommunicator::world(comm_options);
      rc = zs::train::run(argc, argv, *comm, start);
    } catch (const zs::RankFailure& f) {
      // Agreed by every rank (collectives/fail_together.h: a save's or a background write's
      // failure): the lowest failing rank says why and every rank exits 1, with no abort.
      if (rank == f.rank())
        std::fprintf(stderr, "%s: error: %s\n", zs::train::kProgram, f.cause().c_str());
      rc = 1;
    } catch (const zs::Error& e) {
      if (e.code() != zs::ErrorCode::kNonFinite) {
        std::fprintf(stderr, "%s: error: %s\n", zs::train::kProgram, e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      // The non-finite policy decides from all-reduced values: every rank stops at the same step
      // with the same message, so rank 0 says it and every rank exits 1, with no abort.
      if (rank == 0) std::fprintf(stderr, "%s: error: %s\n", zs::train::kProgram, e.what());
      rc = 1;
    } catch (const std::exception& e) {
      // An error after set-up may hit one rank while the others wait in a collective: abort the
      // whole job so that no rank hangs.
      std::fprintf(stderr, "%s: error: %s\n", zs::train::kProgram, e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return rc;
}
