// zs_run: runs a zs_train job under mpirun and restarts it after a failure (a rank killed, a node
// lost, a non-zero exit) on the world that survives, resuming from the newest complete checkpoint
// of the run (docs/reliability.md, "Automatic restart").
//   zs_run --np 4 --max-restarts 3 --log run.jsonl -- zs_train --save-dir ck --save-every 50 ...
//   zs_run --np 8 --hosts node1:4,node2:4 --world-policy pow2 -- zs_train --save-dir /shared/ck ...
// Messages start with `zs_run:` (stderr); the job's output passes through to stdout. Exit status:
// 0 when the job ends with 0; 1 after giving up; 2 for refused flags; 128 + the signal when
// stopped by SIGINT/SIGTERM (the job is ended, not restarted).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/error.h"
#include "supervisor.h"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: zs_run --np N [--hosts H1:S1,H2:S2...] [--max-restarts K] [--restart-window MIN]\n"
    "              [--world-policy pow2|same|any] [--log FILE] [--mpirun-arg ARG]... -- zs_train "
    "ARGS...\n";

// Tests only: ZS_RUN_TEST_SLOTS=S makes S slots survive each failure (without --hosts), as if
// the machine had lost the others. Read here, once.
int test_slots_from_environment() {
  const char* v = std::getenv("ZS_RUN_TEST_SLOTS");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  ZS_CHECK(*end == '\0' && n > 0 && n < (1 << 20), zs::ErrorCode::kInvalidArgument,
           "ZS_RUN_TEST_SLOTS={}: a positive slot count expected (tests only)", v);
  return static_cast<int>(n);
}

// Parses argv; nothing after --help.
std::optional<zs::run::SupervisorOptions> parse(int argc, char** argv) {
  zs::run::SupervisorOptions o;
  std::vector<std::string> own;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) own.push_back(argv[i]);
  for (++i; i < argc; ++i) o.train.push_back(argv[i]);
  std::string hosts, policy = "pow2";
  po::options_description d("zs_run options");
  d.add_options()                                                        //
      ("help", "print this help")                                        //
      ("np", po::value(&o.np)->required(), "ranks of the first launch")  //
      ("hosts", po::value(&hosts),
       "HOST:SLOTS,... the job runs on (mpirun --host); after a failure each is probed with a "
       "one-rank mpirun and those that do not answer are dropped (default: this machine)")  //
      ("max-restarts", po::value(&o.max_restarts)->default_value(o.max_restarts),
       "restarts allowed within --restart-window; the failure after them gives up")  //
      ("restart-window", po::value(&o.restart_window_min)->default_value(o.restart_window_min),
       "minutes over which failures are counted")  //
      ("world-policy", po::value(&policy)->default_value(policy),
       "ranks of a relaunch from the surviving slots: pow2 (the largest power of two, at most "
       "--np), same (--np or give up), any (at most --np)")                                   //
      ("log", po::value(&o.log), "append a JSON line per launch, failure and recovery here")  //
      ("mpirun", po::value(&o.mpirun)->default_value(o.mpirun), "the launcher")               //
      ("mpirun-arg", po::value(&o.mpirun_args)->composing(),
       "an argument for mpirun, before -np (repeat for several: --mpirun-arg=--oversubscribe)")  //
      ("probe-timeout", po::value(&o.probe_timeout_s)->default_value(o.probe_timeout_s),
       "seconds one host's probe may take");
  po::variables_map vm;
  po::store(po::command_line_parser(own).options(d).run(), vm);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << d << "\n";
    return std::nullopt;
  }
  po::notify(vm);
  o.policy = zs::run::parse_world_policy(policy);
  if (!hosts.empty()) o.hosts = zs::run::parse_hosts(hosts);
  o.test_slots = test_slots_from_environment();
  zs::run::check_options(o);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<zs::run::SupervisorOptions> o;
  try {
    o = parse(argc, argv);
    if (!o) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zs_run: error: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    return zs::run::run_supervised(*o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zs_run: error: %s\n", e.what());
    return 1;
  }
}
