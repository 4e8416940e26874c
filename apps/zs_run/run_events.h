// zs_run's --log: one JSON object per line, appended and flushed as each event happens, so a log
// read while the job runs (or after zs_run is killed) holds every event so far.
//   {"event": "launch", "time", "attempt", "np", "hosts", "command"}
//   {"event": "failure", "time", "attempt", "np", "exit_code", "signal", "rank", "rank_signal",
//    "last_step", "hosts_lost", "slots", "new_np"}
//   {"event": "recovery", "time", "attempt", "np", "resumed_from", "resumed_step", "steps_lost",
//    "seconds_to_first_step"}
//   {"event": "give_up" | "stopped" | "end", "time", "attempt", "reason" | "exit_code"}
// Thread-safety: one thread.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace zs::run {

class EventLog {
 public:
  // Opens `path` for appending; an empty path logs nothing. Throws zs::Error naming the path when
  // it cannot be opened.
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Adds "event" and "time" (UTC, ISO 8601 with milliseconds) in front of `fields`.
  void write(const std::string& event, const nlohmann::ordered_json& fields);

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace zs::run
