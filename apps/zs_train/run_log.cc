#include "run_log.h"

#include <cmath>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

// Set for this file by apps/zs_train/CMakeLists.txt.
#ifndef ZS_VERSION
#define ZS_VERSION "unknown"
#endif
#ifndef ZS_GIT_REVISION
#define ZS_GIT_REVISION "unknown"
#endif
#ifndef ZS_BUILD_TYPE
#define ZS_BUILD_TYPE "unknown"
#endif

namespace zs::train {

void check_log_path(const std::string& path, LogMode mode) {
  if (path.empty()) return;
  std::error_code ec;
  ZS_CHECK(mode != LogMode::kNew || !std::filesystem::exists(path, ec), ErrorCode::kInvalidArgument,
           "--json-log {} exists: a new run does not add to an old log; pass --json-log-mode "
           "append or --json-log-mode overwrite, or another file",
           path);
}

RunLog::RunLog(const std::string& path, LogMode mode, std::chrono::steady_clock::time_point start)
    : start_(start) {
  try {
    out_ = FileWriter(
        path, mode == LogMode::kAppend ? FileWriter::Mode::kAppend : FileWriter::Mode::kTruncate);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "--json-log {}", e.what());
  }
}

void RunLog::write(const std::string& type, const nlohmann::ordered_json& fields) {
  if (!out_.is_open()) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  nlohmann::ordered_json j = {{"type", type},
                              {"time", iso8601_utc(std::chrono::system_clock::now())},
                              {"elapsed_s", std::round(elapsed * 1e3) / 1e3}};
  for (const auto& [k, v] : fields.items()) j[k] = v;
  const std::string line =
      j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  const int64_t before = out_.bytes_written();
  try {
    out_.write(line.data(), line.size());
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument,
         "--json-log {}: record {} ({}) not stored; the log holds the {} records before it{}",
         e.what(), records_ + 1, type, records_,
         out_.bytes_written() > before ? " and a partial line" : "");
  }
  ++records_;
}

void RunLog::close() {
  if (!out_.is_open()) return;
  try {
    out_.close();
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "--json-log {} (after {} records)", e.what(), records_);
  }
}

nlohmann::ordered_json build_info() {
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("gcc ") + __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {{"program", "zs_train"},
          {"version", ZS_VERSION},
          {"git_revision", ZS_GIT_REVISION},
          {"compiler", compiler},
          {"build_type", ZS_BUILD_TYPE}};
}

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

}  // namespace zs::train
