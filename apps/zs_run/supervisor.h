// zs_run's supervision loop (docs/reliability.md, "Automatic restart"): launch the job under
// mpirun, watch it, and after a failure relaunch it with --resume on the world that survives,
// until it ends with exit 0, too many failures come within the window, or zs_run is told to stop.
//
// Thread-safety: one thread; run_supervised owns the process's SIGINT/SIGTERM (blocked, read
// from a signalfd) while it runs.
#pragma once

#include <string>
#include <vector>

#include "world.h"

namespace zs::run {

struct SupervisorOptions {
  int np = 0;                        // --np: the first launch's ranks
  std::vector<HostSlots> hosts;      // --hosts (empty: this machine)
  int max_restarts = 3;              // --max-restarts K within --restart-window
  double restart_window_min = 60.0;  // --restart-window MIN
  WorldPolicy policy = WorldPolicy::kPow2;
  std::string log;                       // --log FILE: JSON lines of the failures and recoveries
  std::string mpirun = "mpirun";         // --mpirun: the launcher
  std::vector<std::string> mpirun_args;  // --mpirun-arg, in order
  double probe_timeout_s = 30.0;         // --probe-timeout: one host's probe
  std::vector<std::string> train;        // after "--": the program and its arguments
  // Tests only (ZS_RUN_TEST_SLOTS, read once by main): the slots that survive a failure when
  // --hosts is not given; 0: the first launch's np.
  int test_slots = 0;
};

// Throws zs::Error(kInvalidArgument) naming what is wrong: no program after "--", no --save-dir
// in its arguments, --np below 1, more ranks than --hosts' slots, a negative --max-restarts.
void check_options(const SupervisorOptions& o);

// The arguments of a relaunch: the first launch's, with --resume-from PATH and --overwrite taken
// out (a relaunch continues the newest checkpoint of its own run) and --resume added.
std::vector<std::string> relaunch_args(const std::vector<std::string>& train);

// Runs the job to its end. Returns zs_run's exit status: 0 when a launch ended with 0; 1 after
// giving up (one "zs_run: giving up: ..." line); 128 + the signal when stopped by SIGINT/SIGTERM.
int run_supervised(const SupervisorOptions& o);

}  // namespace zs::run
