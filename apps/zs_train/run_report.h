// What zs_train reports about a step and about the whole run, as values: rank 0 prints them
// (the step line, the closing lines) and --json-log writes them (the "step" and "final" records
// of run_log.h). Computing the values (collectives included) is the program's; this file only
// formats them.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "link_meter.h"
#include "runtime/engine.h"

namespace zs::train {

// One optimizer step as reported.
struct StepReport {
  int64_t step = 0;   // steps done, this one included
  int64_t steps = 0;  // --steps
  StepStats stats;
  double ms = 0.0;              // the step's wall time, device work included
  double tok_s = 0.0;           // tokens per second over all ranks
  double elapsed_s = 0.0;       // since the program started
  double eta_s = 0.0;           // mean wall time per step of this run times the steps left
  bool evaluated = false;       // the validation loss was computed after this step
  double val_loss = NAN;        // the latest validation loss
  StepBytes bytes;              // this rank's bytes sent in the step
  float scale_now = 0.0f;       // the loss scale after the step (named when the step was skipped)
  double mem_peak_bytes = 0.0;  // this rank's peak memory so far, all categories
};

// Prints the step line ("step    12/600 | loss ...") to stdout and flushes it.
void print_step_line(const StepReport& r);
// The fields of the "step" record (without "type", "time", "elapsed_s": RunLog adds them).
nlohmann::ordered_json step_record(const StepReport& r);

// The closing figures of a run, the same on every rank (max or sum over ranks where named).
struct RunTotals {
  std::vector<double> peaks;  // per MemCategory, then the total: max over ranks
  // Each rank's process peak resident set in bytes (VmHWM: model state, the program's and the
  // libraries' own memory, the exports), by rank.
  std::vector<double> rss_peaks;
  double comm_max = 0.0;     // bytes sent in the last step, the most on one rank
  double link_intra = -1.0;  // ... within nodes, all ranks together; -1 unknown
  double link_inter = -1.0;  // ... between nodes, all ranks together; -1 unknown
  double mean_ms = 0.0;      // mean over steps after the first (0 without such steps)
  double mean_tok_s = 0.0;
  double median_ms = 0.0;  // the slowest rank's median step time, steps after the first
  double median_tok_s = 0.0;
  double model_tflops = 0.0;  // model FLOP/s at the median step, all ranks
  double peak_tflops = 0.0;   // one device's peak for MFU; 0 unknown
  int world = 1;
  std::string sample;             // the generated text; empty without --sample-tokens
  bool sample_is_tokens = false;  // `sample` holds token ids ("12 873 ..."), not text
  std::string hash;               // param_hash_hex of the final parameters
};

// Prints the closing lines: peak memory (tracked, and each rank's process peak RSS), bytes sent
// per step, model FLOP/s, the sample and "param_hash: ...".
void print_run_totals(const RunTotals& t);

}  // namespace zs::train
