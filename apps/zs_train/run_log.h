// zs_train's run records (--json-log): one JSON object per line. The first record of a run is
// {"type": "header", ...} (configuration, versions, machine, start time); then one
// {"type": "step", ...} per optimizer step and one {"type": "final", "final": true, ...}. Every
// record carries "time" (ISO-8601 UTC, milliseconds) and "elapsed_s" (seconds since the program
// started). A resumed run appending to its log adds a new header before its steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/file_writer.h"
#include "options.h"

namespace zs::train {

// Refuses, before any work, an existing file under LogMode::kNew (check_paths() has checked the
// path's kind and directory). Throws zs::Error(kInvalidArgument) naming --json-log.
void check_log_path(const std::string& path, LogMode mode);

// Writes go through core's FileWriter: a record that cannot be stored whole (a full disk, an I/O
// error) throws zs::Error naming --json-log, the record and errno's text, so a run never ends
// with exit 0 and a log that lost records.
// Thread-safety: none; rank 0 owns it.
class RunLog {
 public:
  // A log that writes nothing (no --json-log, or not rank 0).
  RunLog() = default;
  // Opens `path` under `mode` (truncating for kNew and kOverwrite). Throws zs::Error when it
  // cannot be opened. `start`: the program's start, for "elapsed_s".
  RunLog(const std::string& path, LogMode mode, std::chrono::steady_clock::time_point start);

  bool enabled() const { return out_.is_open(); }
  // Writes {"type": type, "time": ..., "elapsed_s": ..., fields...} as one line. Byte strings
  // that are not UTF-8 are written with U+FFFD. Throws zs::Error when the line is not stored.
  void write(const std::string& type, const nlohmann::ordered_json& fields);
  // fsync and close (what a filesystem reports only then is reported too). Throws zs::Error.
  void close();

 private:
  FileWriter out_;
  int64_t records_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// zeroshard's version (CMake's project version), the git revision at configure time ("unknown"
// outside a git checkout), the compiler and the build type.
nlohmann::ordered_json build_info();

// "2026-11-24T01:23:45.678Z".
std::string iso8601_utc(std::chrono::system_clock::time_point t);

// For step lines: "12.3 s" under a minute, else "m:ss" or "h:mm:ss".
std::string format_duration(double seconds);

}  // namespace zs::train
