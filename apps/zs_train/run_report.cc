#include "run_report.h"

#include <cstdio>

#include <fmt/format.h>

#include "core/memory_tracker.h"
#include "memory_check.h"
#include "run_log.h"

namespace zs::train {

void print_step_line(const StepReport& r) {
  const StepStats& st = r.stats;
  std::printf(
      "step %5lld/%lld | loss %.4f | lr %.3e | scale %g | gnorm %.3f | %7.1f ms | "
      "%8.0f tok/s | %s, ETA %s%s%s\n",
      static_cast<long long>(r.step), static_cast<long long>(r.steps), st.loss, st.lr,
      st.loss_scale, st.grad_norm, r.ms, r.tok_s, format_duration(r.elapsed_s).c_str(),
      format_duration(r.eta_s).c_str(),
      st.skipped ? fmt::format(" | SKIPPED: non-finite gradient in unit '{}', loss "
                               "scale now {}",
                               st.nonfinite_unit, r.scale_now)
                       .c_str()
                 : "",
      r.evaluated ? fmt::format(" | val loss {:.4f}", r.val_loss).c_str() : "");
  std::fflush(stdout);
}

nlohmann::ordered_json step_record(const StepReport& r) {
  const StepStats& st = r.stats;
  // comm_bytes and mem_peak_bytes: rank 0's (the final record has the max over ranks).
  nlohmann::ordered_json j = {{"step", r.step},
                              {"loss", st.loss},
                              {"lr", st.lr},
                              {"loss_scale", st.loss_scale},
                              {"grad_norm", st.grad_norm},
                              {"step_ms", r.ms},
                              {"tokens_per_s", r.tok_s},
                              {"skipped", st.skipped},
                              {"comm_bytes", r.bytes.total},
                              {"mem_peak_bytes", r.mem_peak_bytes},
                              {"eta_s", std::round(r.eta_s * 10) / 10}};
  if (r.bytes.intra >= 0) {
    j["comm_bytes_intra"] = r.bytes.intra;
    j["comm_bytes_inter"] = r.bytes.inter;
  }
  if (r.evaluated) j["val_loss"] = r.val_loss;
  return j;
}

namespace {

void print_peak_memory(const std::vector<double>& peaks) {
  std::printf("peak memory per rank (max over ranks):");
  for (int c = 0; c < kNumMemCategories; ++c) {
    if (peaks[c] > 0)
      std::printf(" %s %s,", std::string(mem_category_name(static_cast<MemCategory>(c))).c_str(),
                  human_bytes(peaks[c]).c_str());
  }
  std::printf(" total %s\n", human_bytes(peaks.back()).c_str());
}

// "process peak RSS (VmHWM) per rank: 5.61 GiB, 5.40 GiB": what the kernel saw each rank hold at
// most, beside the tracked model state of the line before.
void print_peak_rss(const std::vector<double>& rss) {
  if (rss.empty()) return;
  std::string list;
  for (const double b : rss) list += (list.empty() ? "" : ", ") + human_bytes(b);
  std::printf("process peak RSS (VmHWM) per rank: %s\n", list.c_str());
}

}  // namespace

void print_run_totals(const RunTotals& t) {
  print_peak_memory(t.peaks);
  print_peak_rss(t.rss_peaks);
  std::printf(
      "bytes sent per rank per step: %s%s; mean over steps after the first: %.1f ms, "
      "%.0f tok/s\n",
      human_bytes(t.comm_max).c_str(),
      t.link_intra >= 0 ? fmt::format(" (most on one rank; all ranks: {} within nodes, {} between "
                                      "nodes)",
                                      human_bytes(t.link_intra), human_bytes(t.link_inter))
                              .c_str()
                        : "",
      t.mean_ms, t.mean_tok_s);
  const double peak = t.peak_tflops;
  std::printf("model FLOP/s (median step): %.3f TFLOP/s in all, %.3f per rank%s\n", t.model_tflops,
              t.model_tflops / t.world,
              peak > 0 ? fmt::format(", MFU {:.1f}% of {:.1f} TFLOP/s per rank",
                                     100.0 * t.model_tflops / t.world / peak, peak)
                             .c_str()
                       : "");
  // The model emits bytes, not necessarily UTF-8: invalid sequences print as U+FFFD.
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  if (!t.sample.empty() && t.sample_is_tokens) {
    std::printf("sample tokens: %s\n", t.sample.c_str());
  } else if (!t.sample.empty()) {
    std::printf("sample: %s\n", nlohmann::json(t.sample).dump(-1, ' ', false, kReplace).c_str());
  }
  std::printf("param_hash: %s\n", t.hash.c_str());
}

}  // namespace zs::train
