// train_gpt: trains a byte-level GPT with the zeroshard engine under mpirun.
//   mpirun -np 2 train_gpt                 (ZeRO-3, bf16, the corpus shipped in data/)
//   mpirun -np 4 train_gpt --zero-stage 1 --dtype fp16 --steps 500 --json-log run.jsonl
// Rank 0 prints one line per step (with elapsed time and ETA), validation loss, peak memory per
// category (max over ranks), a generated sample, and a final `param_hash:` line; --json-log
// writes the same as JSON records (run_log.h). Set-up errors (flags, data, model shape)
// print one message and every rank exits 1; an error inside training aborts the job (no rank is
// left waiting in a collective).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "collectives/fail_together.h"
#include "collectives/flight_recorder.h"
#include "collectives/mpi_agreement.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "core/settings.h"
#include "dataset.h"
#include "kernel_report.h"
#include "link_meter.h"
#include "memory_check.h"
#include "nn/gpt.h"
#include "options.h"
#include "run_log.h"
#include "runtime/agreement.h"
#include "runtime/engine.h"

namespace zs::train {
namespace {

using Clock = std::chrono::steady_clock;

// One set-up phase, run by every rank (collectives/fail_together.h): when any rank failed, the
// lowest failing rank prints its message and every rank returns false.
bool setup_phase(Communicator& comm, const std::function<void()>& work) {
  try {
    fail_together(comm, work);
    return true;
  } catch (const RankFailure& f) {
    if (f.rank() == comm.rank()) std::fprintf(stderr, "train_gpt: error: %s\n", f.cause().c_str());
    return false;
  }
}

// What a checkpoint must have been trained with to be resumed: the shape, and for a fine-tune the
// adapters and the base's storage, under their flags' names (a difference is named by its key).
std::string model_json(const TrainOptions& o) {
  const nn::GptConfig& m = o.model;
  nlohmann::json j = {{"model", "gpt"},
                      {"layers", m.arch.layers},
                      {"heads", m.arch.heads},
                      {"width", m.arch.width},
                      {"context", m.arch.context},
                      {"vocab", m.arch.vocab},
                      {"ffn_mult", m.arch.ffn_mult}};
  if (m.adapters.lora
          .enabled()) {  // absent without adapters: full-model checkpoints stay as they were
    j["lora-rank"] = m.adapters.lora.rank;
    j["lora-alpha"] = std::stod(fmt::format("{}", m.adapters.lora.alpha));  // 16, not 16.000000xxx
    j["lora-targets"] = nn::gpt_lora_target_names(m.adapters.lora.targets);
    j["base-dtype"] =
        std::string(dtype_name(o.engine.frozen.storage_or(o.engine.precision.param_dtype)));
  }
  return j.dump();
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

// check_agreement over the text's size and hash; when they differ, again with each rank's
// absolute path, so that the message names the files. Collective.
void check_same_data(Communicator& comm, const TextDataset& data, const std::string& path) {
  const std::string content = fmt::format(
      "{} bytes, xxh3 {:016x}", data.train_bytes() + data.val_bytes(), data.content_hash());
  try {
    const Setting s{"--data", content};
    check_agreement(comm, std::span(&s, 1), "data");
  } catch (const Error&) {
    std::error_code ec;
    const std::string where = std::filesystem::absolute(path, ec).string();
    const Setting s{"--data", fmt::format("{} ({})", where, content)};
    check_agreement(comm, std::span(&s, 1), "ranks read different training text");
  }
}

double validation_loss(Engine& engine, nn::GptModelBase& model, const TextDataset& data,
                       const TrainOptions& o, Communicator& comm, std::vector<int32_t>& tokens) {
  data.fill_val(o.eval_batches, comm.size(), comm.rank(), o.model.run.batch, tokens);
  model.set_tokens(tokens);
  double sum = 0.0;
  for (int m = 0; m < o.eval_batches; ++m) {
    model.load_micro_batch(m);
    engine.forward();
    sum += model.loss();
  }
  sum /= o.eval_batches;
  comm.all_reduce(&sum, &sum, 1, DType::kF64, ReduceOp::kAvg);
  return sum;
}

// Sampling with temperature 0.8 from a generator seeded identically on every rank: all ranks
// draw the same bytes and take part in every (collective) forward.
std::string generate(Engine& engine, nn::GptModelBase& model, const TrainOptions& o,
                     uint64_t& rng) {
  std::vector<int32_t> ctx;
  for (unsigned char c : o.sample_prompt) ctx.push_back(c);
  std::string out = o.sample_prompt;
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
    out.push_back(static_cast<char>(pick));
  }
  return out;
}

std::vector<std::string> command_line(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

int run(int argc, char** argv, MpiCommunicator& comm, Clock::time_point start) {
  const bool root = comm.rank() == 0;
  const auto start_wall = std::chrono::system_clock::now();
  std::optional<TrainOptions> parsed;
  if (!setup_phase(comm, [&] {
        parsed = parse_options(argc, argv, root);
        if (parsed) check_world_size(*parsed, comm.size());
        if (parsed) check_paths(*parsed, root);
        // Only rank 0 writes the log; the others agree on its verdict.
        if (parsed && root) check_log_path(parsed->json_log, parsed->json_log_mode);
      }))
    return 1;
  if (!parsed) return 0;  // --help
  TrainOptions& o = *parsed;
  // Run-wide agreement (runtime/agreement.h, docs/reliability.md): every option's final value,
  // compared across ranks before any work; a difference is named with both values.
  if (!setup_phase(comm, [&] {
        std::vector<Setting> settings;
        for (const auto& [name, value] : o.config.items())
          settings.push_back({"--" + name, value.dump()});
        check_agreement(comm, settings, "options");
      }))
    return 1;
  // --watchdog-timeout: the one setting of the watchdog; communicators made later keep it.
  start_watchdog(o.watchdog_timeout_s, comm.rank(), comm.size());
  // Memory before work (--memory-check): the plan the engine will allocate from, and the text,
  // against what each node has available; each rank checks its node.
  RunMemory need;
  if (!setup_phase(comm, [&] {
        need = plan_run_memory(o, comm.size());
        const int local = LaunchEnvironment::from_environment().local_size.value_or(comm.size());
        if (o.memory_check) check_memory(need, local);
      }))
    return 1;
  if (root) {
    for (const std::string& n : o.notes) std::fprintf(stderr, "train_gpt: note: %s\n", n.c_str());
  }

  // Declared before the engine: the engine's buffers come from the backend's allocator and go
  // first.
  MemoryTracker tracker;
  std::unique_ptr<TextDataset> data;
  std::unique_ptr<Backend> backend;
  nn::GptModelBase* model = nullptr;
  std::unique_ptr<Engine> engine;
  nlohmann::json kernels;
  if (!setup_phase(comm, [&] {
        kernels = kernel_report(o.engine.precision.param_dtype, o.device);
        data = std::make_unique<TextDataset>(o.data, o.val_fraction, o.model.arch.context);
        backend = make_backend(o.device, o.model, comm, tracker, o.collectives == "hierarchical");
        model = &backend->model();
        // CPU: the same core budget as the model; CUDA: the host cores of this rank.
        o.engine.optimizer_threads = o.device == "cpu" ? model->threads() : nn::default_threads();
      }))
    return 1;
  // Every rank must train on the same text: a relative --data read from different working
  // directories, or node-local copies that differ, are refused here.
  if (!setup_phase(comm, [&] { check_same_data(comm, *data, o.data); })) return 1;
  Communicator& ecomm = backend->engine_comm();
  if (!setup_phase(comm, [&] {
        engine = std::make_unique<Engine>(*model, ecomm, o.engine, &tracker, backend->ops());
      }))
    return 1;

  TrainerState state;
  state.rng = o.engine.seed ^ 0x5eedull;
  const std::string mjson = model_json(o);
  RunLog json;
  SaveDir save_dir;  // holds --save-dir's writer lock until the run ends
  if (!setup_phase(comm, [&] {
        save_dir = start_run(*engine, comm, o.checkpoint, o.model, mjson, state);
        if (root && !o.json_log.empty()) json = RunLog(o.json_log, o.json_log_mode, start);
      }))
    return 1;

  const int W = comm.size();
  const int k = o.engine.micro_batches;
  const int64_t tokens_per_step =
      static_cast<int64_t>(W) * k * o.model.run.batch * o.model.arch.context;
  if (root) {
    std::printf("%s", kernel_report_text(kernels).c_str());
    std::printf(
        "zeroshard train_gpt: %d ranks on %s, ZeRO-%d%s, %s compute, %s grads, %lld trainable "
        "params%s (%d layers, width %d, %d heads, context %d), %d x %d sequences per rank per "
        "step, %d threads per rank, data %s (%lld train / %lld val bytes)\n",
        W, backend->device_name().c_str(), static_cast<int>(o.engine.stage),
        engine->shard_group_size() < W
            ? fmt::format(" in shard groups of {} ranks x {} replicas", engine->shard_group_size(),
                          W / engine->shard_group_size())
                  .c_str()
            : "",
        std::string(dtype_name(o.engine.precision.param_dtype)).c_str(),
        std::string(dtype_name(o.engine.precision.grad_dtype)).c_str(),
        static_cast<long long>(engine->num_params()),
        engine->num_frozen_params() > 0
            ? fmt::format(" + {} frozen ({})", engine->num_frozen_params(),
                          dtype_name(o.engine.frozen.storage_or(o.engine.precision.param_dtype)))
                  .c_str()
            : "",
        o.model.arch.layers, o.model.arch.width, o.model.arch.heads, o.model.arch.context, k,
        o.model.run.batch, model->threads(), o.data.c_str(),
        static_cast<long long>(data->train_bytes()), static_cast<long long>(data->val_bytes()));
    if (const HierarchicalCommunicator* h = backend->hierarchical()) {
      const std::string layout =
          fmt::format("{} node{} x {} rank{}", h->num_nodes(), h->num_nodes() == 1 ? "" : "s",
                      h->local_size(), h->local_size() == 1 ? "" : "s");
      std::printf("collectives: %s\n",
                  h->hierarchical() ? fmt::format("hierarchical ({})", layout).c_str()
                  : o.collectives == "flat"
                      ? fmt::format("flat (--collectives flat; {})", layout).c_str()
                      : fmt::format("flat ({}: two levels need several nodes of more than one "
                                    "rank each)",
                                    layout)
                            .c_str());
    }
    std::fflush(stdout);
  }
  if (json.enabled()) {
    nlohmann::ordered_json h = build_info();
    h["start_time"] = iso8601_utc(start_wall);
    h["world_size"] = W;
    h["threads"] = model->threads();
    h["device"] = o.device;
    h["gpu"] = o.device == "cpu" ? "none" : backend->device_name();
    h["cpu"] = kernels.at("cpu");
    h["cpu_features"] = kernels.at("features");
    h["kernels"] = nlohmann::ordered_json::parse(kernels.dump());
    h["params"] = engine->num_params();
    h["frozen_params"] = engine->num_frozen_params();
    h["collectives"] = backend->hierarchical() && backend->hierarchical()->hierarchical()
                           ? "hierarchical"
                           : "flat";
    h["tokens_per_step"] = tokens_per_step;
    h["resumed_at_step"] = state.step;
    h["command_line"] = command_line(argc, argv);
    h["config"] = o.config;
    json.write("header", h);
  }

  std::vector<int32_t> tokens, val_tokens;
  double tok_s_sum = 0.0, ms_sum = 0.0, last_loss = 0.0, last_val = NAN;
  std::vector<double> step_ms;  // steps after the first, for the median
  step_ms.reserve(static_cast<size_t>(o.steps));
  int64_t timed = 0;
  StepBytes step_bytes;
  LinkMeter meter(*engine, ecomm, backend->hierarchical());
  const int64_t first = state.step;
  const auto loop_start = Clock::now();
  for (int64_t s = first; s < o.steps; ++s) {
    data->fill_train(s, k, W, comm.rank(), o.model.run.batch, o.engine.seed, tokens);
    model->set_tokens(tokens);
    meter.start();
    const auto t0 = Clock::now();
    const StepStats st = engine->step();
    backend->synchronize();  // a device step ends when its last kernel does
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    step_bytes = meter.stop();
    state.step = s + 1;
    state.data_cursor = s + 1;
    const double tok_s = tokens_per_step / (ms / 1e3);
    if (s > first) {  // the first step pays one-time costs (page faults, primitive set-up)
      tok_s_sum += tok_s;
      ms_sum += ms;
      step_ms.push_back(ms);
      ++timed;
    }
    last_loss = st.loss;
    const bool eval_now = (o.eval_every > 0 && (s + 1) % o.eval_every == 0) || s + 1 == o.steps;
    if (eval_now) last_val = validation_loss(*engine, *model, *data, o, comm, val_tokens);
    // ETA: this run's mean wall time per step (evaluation included) times the steps left.
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double eta = std::chrono::duration<double>(now - loop_start).count() /
                       static_cast<double>(s + 1 - first) * static_cast<double>(o.steps - s - 1);
    if (root && ((s + 1) % o.log_every == 0 || s == first || s + 1 == o.steps)) {
      std::printf(
          "step %5lld/%lld | loss %.4f | lr %.3e | scale %g | gnorm %.3f | %7.1f ms | "
          "%8.0f tok/s | %s, ETA %s%s%s\n",
          static_cast<long long>(s + 1), static_cast<long long>(o.steps), st.loss, st.lr,
          st.loss_scale, st.grad_norm, ms, tok_s, format_duration(elapsed).c_str(),
          format_duration(eta).c_str(),
          st.skipped ? fmt::format(" | SKIPPED: non-finite gradient in unit '{}', loss "
                                   "scale now {}",
                                   st.nonfinite_unit, engine->loss_scaler_state().scale)
                           .c_str()
                     : "",
          eval_now ? fmt::format(" | val loss {:.4f}", last_val).c_str() : "");
      std::fflush(stdout);
    }
    if (json.enabled()) {
      // comm_bytes and mem_peak_bytes: rank 0's (the final record has the max over ranks).
      nlohmann::ordered_json j = {
          {"step", s + 1},
          {"loss", st.loss},
          {"lr", st.lr},
          {"loss_scale", st.loss_scale},
          {"grad_norm", st.grad_norm},
          {"step_ms", ms},
          {"tokens_per_s", tok_s},
          {"skipped", st.skipped},
          {"comm_bytes", step_bytes.total},
          {"mem_peak_bytes", static_cast<double>(engine->tracker().peak_total())},
          {"eta_s", std::round(eta * 10) / 10}};
      if (step_bytes.intra >= 0) {
        j["comm_bytes_intra"] = step_bytes.intra;
        j["comm_bytes_inter"] = step_bytes.inter;
      }
      if (eval_now) j["val_loss"] = last_val;
      json.write("step", j);
    }
    save_if_due(*engine, comm, o.checkpoint, mjson, state, s + 1 == o.steps);
  }

  const std::vector<double> peaks = peak_memory_max(*engine, comm);
  // The slowest rank's median step time (as the PyTorch peer script reports it).
  double median_ms = 0.0;
  if (!step_ms.empty()) {
    std::nth_element(step_ms.begin(), step_ms.begin() + step_ms.size() / 2, step_ms.end());
    median_ms = step_ms[step_ms.size() / 2];
  }
  comm.all_reduce(&median_ms, &median_ms, 1, DType::kF64, ReduceOp::kMax);
  // Bytes sent in the last step: the most any rank sent, and by link class all ranks together
  // (-1: unknown on some rank).
  double comm_max = static_cast<double>(step_bytes.total);
  comm.all_reduce(&comm_max, &comm_max, 1, DType::kF64, ReduceOp::kMax);
  const bool classed = step_bytes.intra >= 0;
  double link_sum[3] = {static_cast<double>(step_bytes.intra),
                        static_cast<double>(step_bytes.inter), classed ? 0.0 : 1.0};
  comm.all_reduce(link_sum, link_sum, 3, DType::kF64, ReduceOp::kSum);
  if (link_sum[2] > 0) link_sum[0] = link_sum[1] = -1;
  // Model FLOPs per token, PaLM's count: 6 per trainable parameter (forward + backward), 4 per
  // frozen one (forward and the input gradient; no weight gradient) plus attention's
  // 12 * layers * context * width; activation recomputation is not counted.
  const double flops_per_token =
      6.0 * static_cast<double>(engine->num_params()) +
      4.0 * static_cast<double>(engine->num_frozen_params()) +
      12.0 * o.model.arch.layers * static_cast<double>(o.model.arch.context) * o.model.arch.width;
  const double median_tok_s = median_ms > 0 ? tokens_per_step / (median_ms / 1e3) : 0.0;
  const double model_tflops = flops_per_token * median_tok_s / 1e12;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : backend->peak_tflops();
  std::string sample;
  if (o.sample_tokens > 0) sample = generate(*engine, *model, o, state.rng);
  export_if_asked(*engine, comm, o.checkpoint, o.model);
  const std::string hash = param_hash_hex(engine->param_hash());

  if (root) {
    std::printf("peak memory per rank (max over ranks):");
    for (int c = 0; c < kNumMemCategories; ++c) {
      if (peaks[c] > 0)
        std::printf(" %s %s,", std::string(mem_category_name(static_cast<MemCategory>(c))).c_str(),
                    human_bytes(peaks[c]).c_str());
    }
    std::printf(" total %s\n", human_bytes(peaks.back()).c_str());
    std::printf(
        "bytes sent per rank per step: %s%s; mean over steps after the first: %.1f ms, "
        "%.0f tok/s\n",
        human_bytes(comm_max).c_str(),
        link_sum[0] >= 0 ? fmt::format(" (most on one rank; all ranks: {} within nodes, {} between "
                                       "nodes)",
                                       human_bytes(link_sum[0]), human_bytes(link_sum[1]))
                               .c_str()
                         : "",
        timed ? ms_sum / timed : 0.0, timed ? tok_s_sum / timed : 0.0);
    std::printf("model FLOP/s (median step): %.3f TFLOP/s in all, %.3f per rank%s\n", model_tflops,
                model_tflops / W,
                peak > 0 ? fmt::format(", MFU {:.1f}% of {:.1f} TFLOP/s per rank",
                                       100.0 * model_tflops / W / peak, peak)
                               .c_str()
                         : "");
    // The model emits bytes, not necessarily UTF-8: invalid sequences print as U+FFFD.
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    if (!sample.empty()) {
      std::printf("sample: %s\n", nlohmann::json(sample).dump(-1, ' ', false, kReplace).c_str());
    }
    std::printf("param_hash: %s\n", hash.c_str());
    if (json.enabled()) {
      nlohmann::ordered_json mem;
      for (int c = 0; c < kNumMemCategories; ++c) {
        mem[std::string(mem_category_name(static_cast<MemCategory>(c)))] = peaks[c];
      }
      mem["total"] = peaks.back();
      nlohmann::ordered_json j = {
          {"final", true},
          {"params", engine->num_params()},
          {"frozen_params", engine->num_frozen_params()},
          {"world_size", W},
          {"stage", static_cast<int>(o.engine.stage)},
          {"dtype", std::string(dtype_name(o.engine.precision.param_dtype))},
          {"steps", o.steps},
          {"loss", last_loss},
          {"val_loss", last_val},
          {"tokens_per_s", timed ? tok_s_sum / timed : 0.0},
          {"step_ms", timed ? ms_sum / timed : 0.0},
          {"median_step_ms", median_ms},
          {"median_tokens_per_s", median_tok_s},
          {"device", backend->device_name()},
          {"model_tflops", model_tflops},
          {"mfu", peak > 0 ? model_tflops / W / peak : 0.0},
          {"memory_bytes", mem},
          {"comm_bytes_per_step", comm_max},
          {"comm_bytes_intra_all_ranks", link_sum[0]},
          {"comm_bytes_inter_all_ranks", link_sum[1]},
          {"shard_group_size", engine->shard_group_size()},
          {"collectives", o.collectives},
          {"param_hash", hash},
          {"kernels", nlohmann::ordered_json::parse(kernels.dump())},
          {"sample", sample}};
      json.write("final", j);
      json.close();
    }
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
    if (rank == f.rank()) std::fprintf(stderr, "train_gpt: error: %s\n", f.cause().c_str());
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
    } catch (const zs::Error& e) {
      if (e.code() != zs::ErrorCode::kNonFinite) {
        std::fprintf(stderr, "train_gpt: error: %s\n", e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      // The non-finite policy decides from all-reduced values: every rank stops at the same step
      // with the same message, so rank 0 says it and every rank exits 1, with no abort.
      if (rank == 0) std::fprintf(stderr, "train_gpt: error: %s\n", e.what());
      rc = 1;
    } catch (const std::exception& e) {
      // An error after set-up may hit one rank while the others wait in a collective: abort the
      // whole job so that no rank hangs.
      std::fprintf(stderr, "train_gpt: error: %s\n", e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return rc;
}
