#include "run_events.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "core/error.h"

namespace zs::run {
namespace {

std::string now_iso() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

}  // namespace

EventLog::EventLog(const std::string& path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  ZS_CHECK(file_ != nullptr, ErrorCode::kInvalidArgument, "--log {}: cannot open: {}", path,
           std::strerror(errno));
}

EventLog::~EventLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventLog::write(const std::string& event, const nlohmann::ordered_json& fields) {
  if (file_ == nullptr) return;
  nlohmann::ordered_json j = {{"event", event}, {"time", now_iso()}};
  for (const auto& [k, v] : fields.items()) j[k] = v;
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace zs::run
