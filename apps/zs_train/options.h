// zs_train's command line: Boost.Program_options maps flags (and an optional config file of
// `name = value` lines, and an optional DeepSpeed JSON configuration, ds_config.h) onto the
// library's policy structs. The flags are declared, with their checks, in option_table.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpointing.h"
#include "data_source.h"
#include "models/gpt/gpt.h"
#include "runtime/engine_config.h"

namespace zs::train {

// --json-log-mode: what to do when the --json-log file already exists.
enum class LogMode {
  kNew,        // refuse to start (the default without --resume/--resume-from)
  kAppend,     // add this run's records after the old ones (the default when resuming)
  kOverwrite,  // truncate
};

struct TrainOptions {
  nn::GptConfig
      model;  // architecture, run settings (batch, checkpointing, dtype, threads), adapters
  EngineConfig engine;  // stage, precision, optimizer, schedule, clipping, prefetch, seed
  CheckpointFlags checkpoint;
  int64_t steps = 600;
  std::string data;                      // file or directory of text; empty with --train-shards
  std::string train_shards, val_shards;  // token shards (token_shards.h): a file or a glob each
  double val_fraction = 0.1;
  int64_t eval_every = 100;
  int eval_batches = 4;
  int sample_tokens = 120;
  std::string sample_prompt = "The ";
  std::string json_log;
  LogMode json_log_mode = LogMode::kNew;
  int64_t log_every = 1;
  // --watchdog-timeout: seconds a collective may wait before the watchdog ends the job with where
  // each rank is (docs/reliability.md); 0: off. Default: ZS_WATCHDOG_S, else 300.
  double watchdog_timeout_s = 300.0;
  std::string device = "cpu";  // --device: cpu or cuda (apps/zs_train/backend.h)
  // --collectives: "hierarchical" (the default: the CPU engine's world communicator runs the
  // two-level algorithms where the job spans nodes of more than one rank each, the flat ones
  // elsewhere) or "flat" (always the flat ones); docs/scaling.md.
  std::string collectives = "hierarchical";
  // --memory-check on|off: refuse before work a run whose memory plan does not fit this node
  // (memory_check.h).
  bool memory_check = true;
  double peak_tflops = 0.0;  // --peak-tflops: for MFU; 0 = the device's known peak, if any
  // --deepspeed-config: the file, and its train_batch_size when given (checked against the
  // world size by check_world_size()).
  std::string ds_config;
  std::optional<int64_t> ds_train_batch_size;
  // --global-micro-batches: micro-batches per optimizer step over all ranks; 0 = not given (the
  // per-rank count is --gradient-accumulation-steps).
  int global_micro_batches = 0;
  bool gradient_accumulation_given = false;  // --gradient-accumulation-steps (or its alias) set
  // Every option's final value by its flag name (defaults included), for the log's header.
  nlohmann::ordered_json config;
  // The data flags as one source (data_source.h).
  DataSource data_source() const { return {data, train_shards, val_shards, val_fraction}; }
  // Notes for rank 0 to print once (a ds_config key without effect, an --init-from-hf not read).
  std::vector<std::string> notes;
};

// Parses argv. Returns std::nullopt after printing --help (exit 0). Throws zs::Error
// (kInvalidArgument) with one clear message, naming the flag (or the DeepSpeed key) and the
// allowed values, for unknown options, bad values and inconsistent settings.
std::optional<TrainOptions> parse_options(int argc, char** argv, bool print_help);

// Every path flag given (and --data's default) against its use (paths.h): on every rank for what
// every rank reads or writes, on rank 0 (`root`) for what rank 0 alone writes. Throws zs::Error.
void check_paths(const TrainOptions& o, bool root);

// What needs the world size: --global-micro-batches M sets the micro-batches per rank to M / W
// ([Note: world-invariant reduction] in runtime/engine_config.h); a DeepSpeed train_batch_size
// is checked. Throws zs::Error.
void resolve_world_size(TrainOptions& o, int world_size);

}  // namespace zs::train
