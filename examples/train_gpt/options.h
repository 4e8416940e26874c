// train_gpt's command line: Boost.Program_options maps flags (and an optional config file of
// `name = value` lines) onto the library's policy structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpointing.h"
#include "nn/gpt.h"
#include "runtime/engine_config.h"

namespace zs::train {

struct TrainOptions {
  nn::GptConfig model;  // layers, heads, width, context, batch, checkpointing, dtype, threads
  EngineConfig engine;  // stage, precision, optimizer, schedule, clipping, prefetch, seed
  CheckpointFlags checkpoint;
  int64_t steps = 600;
  std::string data;  // file or directory of text
  double val_fraction = 0.1;
  int64_t eval_every = 100;
  int eval_batches = 4;
  int sample_tokens = 120;
  std::string sample_prompt = "The ";
  std::string json_log;
  int64_t log_every = 1;
  std::string device = "cpu";  // --device: cpu or cuda (examples/train_gpt/backend.h)
  double peak_tflops = 0.0;    // --peak-tflops: for MFU; 0 = the device's known peak, if any
};

// Parses argv. Returns std::nullopt after printing --help (exit 0). Throws zs::Error
// (kInvalidArgument) with one clear message for unknown options, bad values and inconsistent
// settings.
std::optional<TrainOptions> parse_options(int argc, char** argv, bool print_help);

}  // namespace zs::train
