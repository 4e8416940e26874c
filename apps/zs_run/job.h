// zs_run's child processes: an mpirun job whose output is read line by line while it runs, and
// short commands run with a time limit (the host probes). POSIX only.
//
// Each child runs in a process group of its own, with stdin from /dev/null (mpirun forwards stdin
// to rank 0; a background group reading the terminal would be stopped), so that a Ctrl-C at the
// terminal reaches zs_run alone and zs_run decides how the job ends.
//
// Thread-safety: one thread. The caller blocks SIGINT and SIGTERM and passes the signalfd that
// receives them (make_stop_signal_fd); children get them unblocked.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace zs::run {

using Clock = std::chrono::steady_clock;

// How a child ended.
struct JobEnd {
  int exit_code = 0;       // when it exited (signal == 0)
  int signal = 0;          // the signal that ended it, or 0
  int stop_signal = 0;     // SIGINT/SIGTERM received by zs_run, which then ended the job; or 0
  int orphans_killed = 0;  // processes the child left behind, killed after its end
  bool ok() const { return signal == 0 && exit_code == 0 && stop_signal == 0; }
};

// Blocks SIGINT and SIGTERM in this process and returns a signalfd that receives them; makes this
// process the subreaper of its descendants (prctl PR_SET_CHILD_SUBREAPER), so that ranks orphaned
// by a dying mpirun become its children and run_job can end them. Throws zs::Error on failure.
int make_stop_signal_fd();

// Runs argv[0] (found on PATH) with argv, its stdout and stderr merged and handed to `on_line`
// one line at a time (without the newline) as they arrive, with the time each was read. Returns
// when the child has ended and its output is drained. A SIGINT/SIGTERM on `stop_fd` sends SIGTERM
// to the child's group, then SIGKILL after `grace`; the JobEnd then names it. Whatever of the
// group is left when the child ends is killed, and so is every process it left behind (ranks in
// groups of their own whose mpirun died: they are this process's children by then), counted in
// JobEnd::orphans_killed. Throws zs::Error when the child cannot be started.
JobEnd run_job(const std::vector<std::string>& argv, int stop_fd,
               const std::function<void(const std::string&, Clock::time_point)>& on_line,
               std::chrono::seconds grace = std::chrono::seconds(10));

// Runs argv with its output discarded; kills its group after `limit`. True when it exited 0 in
// time. `stop_fd` as above: a stop signal ends the command (false) and is left pending for the
// caller's next read (stop_requested).
bool run_quietly(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                 int stop_fd);

// Whether a SIGINT/SIGTERM arrived on `stop_fd` (consumed: returns the signal, or 0).
int stop_requested(int stop_fd);

// "SIGKILL" for 9, else "signal N".
std::string signal_name(int sig);

}  // namespace zs::run
