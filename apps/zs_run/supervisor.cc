#include "supervisor.h"

#include <cstdio>
#include <deque>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "job.h"
#include "run_events.h"

namespace zs::run {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args)
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  return false;
}

// What one launch's output said, read line by line.
struct Watch {
  int64_t last_step = -1;  // the last "step N/M" line's N
  std::optional<Clock::time_point> first_step_at;
  std::string resumed_from;             // "resumed from PATH (step N, ..." or "" (fresh / none yet)
  int64_t resumed_step = -1;            // 0 for "resume: no complete checkpoint"
  int dead_rank = -1, dead_signal = 0;  // mpirun's "process rank R ... exited on signal S"

  void see(const std::string& line, Clock::time_point t) {
    static const std::regex step(R"(^step +([0-9]+)/[0-9]+)");
    static const std::regex resumed(R"(^resumed from (\S+) \(step ([0-9]+),)");
    static const std::regex died(
        R"(process rank ([0-9]+) with PID [0-9]+ on node \S+ exited on signal ([0-9]+))");
    std::smatch m;
    if (std::regex_search(line, m, step)) {
      last_step = std::stoll(m[1]);
      if (!first_step_at) first_step_at = t;
    } else if (std::regex_search(line, m, resumed)) {
      resumed_from = m[1];
      resumed_step = std::stoll(m[2]);
    } else if (line.rfind("resume: no complete checkpoint in", 0) == 0) {
      resumed_step = 0;
    } else if (dead_rank < 0 && std::regex_search(line, m, died)) {
      dead_rank = std::stoi(m[1]);
      dead_signal = std::stoi(m[2]);
    }
  }
};

// The failure being recovered from, until the relaunch's first step.
struct Failure {
  Clock::time_point at;
  int64_t last_step = -1;
};

std::vector<std::string> command(const SupervisorOptions& o, int attempt, int np,
                                 const std::vector<HostSlots>& hosts) {
  std::vector<std::string> argv = {o.mpirun};
  argv.insert(argv.end(), o.mpirun_args.begin(), o.mpirun_args.end());
  if (!hosts.empty()) {
    argv.push_back("--host");
    argv.push_back(hosts_text(hosts));
  }
  argv.push_back("-np");
  argv.push_back(std::to_string(np));
  const std::vector<std::string> train = attempt == 0 ? o.train : relaunch_args(o.train);
  argv.insert(argv.end(), train.begin(), train.end());
  return argv;
}

// The hosts that answer a one-rank mpirun within the probe timeout, in --hosts order.
std::vector<HostSlots> probe_hosts(const SupervisorOptions& o, int stop_fd) {
  std::vector<HostSlots> alive;
  for (const HostSlots& h : o.hosts) {
    std::vector<std::string> argv = {o.mpirun};
    argv.insert(argv.end(), o.mpirun_args.begin(), o.mpirun_args.end());
    argv.insert(argv.end(), {"--host", h.host + ":1", "-np", "1", "true"});
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(o.probe_timeout_s * 1e3));
    if (run_quietly(argv, limit, stop_fd)) alive.push_back(h);
  }
  return alive;
}

std::string describe_end(const JobEnd& e) {
  return e.signal != 0 ? "ended by " + signal_name(e.signal)
                       : fmt::format("exit status {}", e.exit_code);
}

nlohmann::ordered_json optional_int(int64_t v) {
  return v < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
}

}  // namespace

void check_options(const SupervisorOptions& o) {
  ZS_CHECK(!o.train.empty(), ErrorCode::kInvalidArgument,
           "no program to run: give it after \"--\", e.g. zs_run --np 4 -- zs_train --save-dir "
           "DIR --save-every 50");
  ZS_CHECK(has_flag(o.train, "--save-dir"), ErrorCode::kInvalidArgument,
           "{} has no --save-dir: a relaunch resumes from the newest checkpoint in the save "
           "directory, so without one every restart would start over; give --save-dir DIR (and "
           "--save-every N)",
           o.train[0]);
  ZS_CHECK(o.np >= 1, ErrorCode::kInvalidArgument, "--np {}: at least 1", o.np);
  ZS_CHECK(o.max_restarts >= 0, ErrorCode::kInvalidArgument, "--max-restarts {} is negative",
           o.max_restarts);
  ZS_CHECK(o.restart_window_min > 0, ErrorCode::kInvalidArgument,
           "--restart-window {}: minutes, above 0", o.restart_window_min);
  ZS_CHECK(o.probe_timeout_s > 0, ErrorCode::kInvalidArgument, "--probe-timeout {}: above 0",
           o.probe_timeout_s);
  ZS_CHECK(o.hosts.empty() || total_slots(o.hosts) >= o.np, ErrorCode::kInvalidArgument,
           "--np {} but --hosts {} has {} slots", o.np, hosts_text(o.hosts), total_slots(o.hosts));
}

std::vector<std::string> relaunch_args(const std::vector<std::string>& train) {
  std::vector<std::string> out;
  for (size_t i = 0; i < train.size(); ++i) {
    const std::string& a = train[i];
    if (i > 0 && a == "--resume-from") {
      ++i;  // and its value
      continue;
    }
    if (i > 0 && (a.rfind("--resume-from=", 0) == 0 || a == "--overwrite")) continue;
    out.push_back(a);
  }
  if (!has_flag(out, "--resume")) out.push_back("--resume");
  return out;
}

namespace {

nlohmann::ordered_json null_or(bool present, const nlohmann::ordered_json& v) {
  return present ? v : nlohmann::ordered_json();
}

// The loop's state across launches; each method is one phase of a launch's life.
class Supervisor {
 public:
  explicit Supervisor(const SupervisorOptions& o)
      : o_(o), log_(o.log), stop_fd_(make_stop_signal_fd()), np_(o.np), hosts_(o.hosts) {}

  int run() {
    for (attempt_ = 1;; ++attempt_) {
      Watch w;
      const JobEnd end = launch(w);
      if (end.orphans_killed > 0)
        std::fprintf(stderr,
                     "zs_run: killed %d process%s the job left behind (ranks whose mpirun died)\n",
                     end.orphans_killed, end.orphans_killed == 1 ? "" : "es");
      if (end.stop_signal != 0)
        return stopped(end.stop_signal, "the job was ended and is not restarted");
      if (end.ok()) {
        log_.write("end", {{"attempt", attempt_}, {"exit_code", 0}, {"last_step", w.last_step}});
        return 0;
      }
      if (const std::optional<int> rc = after_failure(end, w)) return *rc;
    }
  }

 private:
  // Starts launch attempt_ on np_ ranks and follows it to its end.
  JobEnd launch(Watch& w) {
    const std::vector<std::string> argv = command(o_, attempt_ - 1, np_, hosts_);
    std::fprintf(stderr, "zs_run: launch %d: %d rank%s%s: %s\n", attempt_, np_, np_ == 1 ? "" : "s",
                 hosts_.empty() ? "" : (" on " + hosts_text(hosts_)).c_str(),
                 fmt::format("{}", fmt::join(argv, " ")).c_str());
    log_.write(
        "launch",
        {{"attempt", attempt_}, {"np", np_}, {"hosts", hosts_text(hosts_)}, {"command", argv}});
    return run_job(argv, stop_fd_,
                   [&](const std::string& line, Clock::time_point t) { on_line(w, line, t); });
  }

  // One line of the job's output: passed through, read, and the recovery recorded at the first
  // step after a failure.
  void on_line(Watch& w, const std::string& line, Clock::time_point t) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const bool first = !w.first_step_at;
    w.see(line, t);
    if (!recovering_ || !first || !w.first_step_at) return;
    const double s = seconds(*w.first_step_at - recovering_->at);
    const int64_t lost = w.resumed_step >= 0 && recovering_->last_step >= 0
                             ? recovering_->last_step - w.resumed_step
                             : -1;
    std::fprintf(
        stderr,
        "zs_run: recovered: %d rank%s resumed at step %lld, first step %.1f s after the "
        "failure%s\n",
        np_, np_ == 1 ? "" : "s", static_cast<long long>(w.resumed_step), s,
        lost >= 0 ? fmt::format(" ({} step{} lost)", lost, lost == 1 ? "" : "s").c_str() : "");
    log_.write("recovery", {{"attempt", attempt_},
                            {"np", np_},
                            {"resumed_from", w.resumed_from},
                            {"resumed_step", optional_int(w.resumed_step)},
                            {"steps_lost", optional_int(lost)},
                            {"seconds_to_first_step", s}});
    recovering_.reset();
  }

  nlohmann::ordered_json failure_record(const JobEnd& end, const Watch& w, int64_t last_step) {
    const bool sig = end.signal != 0, rank = w.dead_rank >= 0;
    return {{"attempt", attempt_},
            {"orphans_killed", end.orphans_killed},
            {"np", np_},
            {"exit_code", null_or(!sig, end.exit_code)},
            {"signal", null_or(sig, signal_name(end.signal))},
            {"rank", null_or(rank, w.dead_rank)},
            {"rank_signal", null_or(rank, signal_name(w.dead_signal))},
            {"last_step", optional_int(last_step)}};
  }

  // After a failed launch: records it, finds the world that survives and either sets up the next
  // launch (nothing returned) or ends zs_run (its exit status).
  std::optional<int> after_failure(const JobEnd& end, const Watch& w) {
    const Clock::time_point at = Clock::now();
    const int64_t last_step = w.last_step >= 0 ? w.last_step
                              : recovering_    ? recovering_->last_step
                                               : -1;
    std::fprintf(
        stderr, "zs_run: the job failed (%s%s)%s\n", describe_end(end).c_str(),
        w.dead_rank >= 0
            ? fmt::format("; rank {} ended by {}", w.dead_rank, signal_name(w.dead_signal)).c_str()
            : "",
        w.last_step >= 0 ? fmt::format(" after step {}", w.last_step).c_str()
                         : " before its first step");
    nlohmann::ordered_json rec = failure_record(end, w, last_step);
    // Why not restart a refusal: zs_train exits 2 when its flags are refused, before any work;
    // the same flags would be refused again.
    if (end.signal == 0 && end.exit_code == 2 && w.last_step < 0) {
      log_.write("failure", rec);
      return give_up(fmt::format(
          "the job was refused before its first step (exit status 2: {} refused its flags); a "
          "relaunch would be refused alike",
          o_.train[0]));
    }
    failures_.push_back(at);
    const auto window = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::ratio<60>>(o_.restart_window_min));
    while (!failures_.empty() && at - failures_.front() > window) failures_.pop_front();
    const bool over = static_cast<int>(failures_.size()) > o_.max_restarts;
    int slots = o_.test_slots > 0 ? o_.test_slots : o_.np;
    std::vector<std::string> lost;
    if (!o_.hosts.empty() && !over) {
      const std::vector<HostSlots> alive = probe_hosts(o_, stop_fd_);
      for (const HostSlots& h : hosts_) {
        bool found = false;
        for (const HostSlots& a : alive) found = found || a.host == h.host;
        if (!found) lost.push_back(h.host);
      }
      hosts_ = alive;
      slots = total_slots(alive);
    }
    const int new_np = next_world(o_.policy, o_.np, slots);
    rec["hosts_lost"] = lost;
    rec["slots"] = slots;
    rec["new_np"] = new_np;
    log_.write("failure", rec);
    if (const int sig = stop_requested(stop_fd_); sig != 0) return stopped(sig, "not restarting");
    if (over)
      return give_up(fmt::format(
          "{} failures within {:g} minutes, more than --max-restarts {} allows; the last: {}",
          failures_.size(), o_.restart_window_min, o_.max_restarts, describe_end(end)));
    const std::string lost_text = fmt::format("{}", fmt::join(lost, ", "));
    if (new_np == 0)
      return give_up(fmt::format("{} slot{} survive{} ({}), and --world-policy {} needs {}", slots,
                                 slots == 1 ? "" : "s", slots == 1 ? "s" : "",
                                 lost.empty() ? "no host lost" : "lost: " + lost_text,
                                 world_policy_name(o_.policy),
                                 o_.policy == WorldPolicy::kSame ? fmt::format("{} ranks", o_.np)
                                                                 : std::string("at least one")));
    if (new_np != np_)
      std::fprintf(stderr,
                   "zs_run: %d slot%s survive%s%s: relaunching on %d ranks (--world-policy %s)\n",
                   slots, slots == 1 ? "" : "s", slots == 1 ? "s" : "",
                   lost.empty() ? "" : (" (lost: " + lost_text + ")").c_str(), new_np,
                   world_policy_name(o_.policy));
    np_ = new_np;
    recovering_ = Failure{at, last_step};
    return std::nullopt;
  }

  int give_up(const std::string& why) {
    std::fprintf(stderr, "zs_run: giving up: %s\n", why.c_str());
    log_.write("give_up", {{"attempt", attempt_}, {"reason", why}});
    return 1;
  }

  int stopped(int sig, const char* what) {
    std::fprintf(stderr, "zs_run: stopped by %s: %s\n", signal_name(sig).c_str(), what);
    log_.write("stopped", {{"attempt", attempt_}, {"signal", signal_name(sig)}});
    return 128 + sig;
  }

  const SupervisorOptions& o_;
  EventLog log_;
  const int stop_fd_;
  int np_;
  std::vector<HostSlots> hosts_;  // those of the next launch
  int attempt_ = 1;
  std::deque<Clock::time_point> failures_;  // within the window
  std::optional<Failure> recovering_;       // until the relaunch's first step
};

}  // namespace

int run_supervised(const SupervisorOptions& o) { return Supervisor(o).run(); }

}  // namespace zs::run
