// The library's settings from the environment, read in one place.
//
// [Note: environment settings] Every ZS_* variable the library reads and its field in Settings.
// An unset or empty variable takes the default; any other value outside "allowed" is refused.
//
//   variable                 field                 type       default  allowed
//   ZS_MAX_ISA               max_isa               SimdLevel  avx512   scalar, avx2, avx512
//   ZS_FORCE_SCALAR          force_scalar          bool       0        0, 1
//   ZS_COLLECTIVES_SHM       collectives_shm       bool       1        0, 1
//   ZS_COLLECTIVES_SHM_PASS  collectives_shm_pass  size_t     524288   an integer >= 1 (bytes)
//   ZS_CHECK_COLLECTIVES     check_collectives     bool       0        0, 1
//   ZS_FAKE_NODES            fake_nodes            int        0        an integer >= 1
//   ZS_WATCHDOG_S            watchdog_s            double     unset    a number >= 0 (seconds)
//   ZS_TEST_SAVE_DELAY_MS    test_save_delay_ms    int        0        an integer >= 1 (tests only)
//   ZS_TEST_PAUSE_AFTER_STEP test_pause_after_step int64_t    0        an integer >= 1 (tests only)
//   ZS_TEST_PAUSE_AT_RESUME  test_pause_at_resume  int64_t    0        an integer >= 1 (tests only)
//
// One variable that is not ours is read here too, never refused: ONEDNN_MAX_CPU_ISA, the cap
// oneDNN applies to its own kernels (it validates the value itself), into onednn_max_cpu_isa, so
// that int8_gemm_supported() (core/cpu_features.h) knows which kernels oneDNN will run.
//
// What each one does is said at its field below.
//
// Who owns them: the configuration of each part takes its defaults from one Settings value, read
// when the part is made, and can be given explicitly instead: MpiCommunicatorOptions
// (collectives_shm, collectives_shm_pass, check_collectives, watchdog_s) and make_node_topology()'s
// fake_nodes argument (collectives/topology.h). The ISA cap of core/cpu_features.h (max_isa,
// force_scalar) is process-wide: read once, at the first dispatch, and fixed from then on (no
// explicit form: the kernels must not change level mid-run). Settings::from_environment() is the
// only function that reads these variables.
//
// LaunchEnvironment holds what the launcher (mpirun, Slurm) writes into each process's
// environment: facts about where this process runs, not choices, so they are not Settings (no
// default, nothing to override, not refused: they are taken as the launcher wrote them).
// LaunchEnvironment::from_environment() is the only function that reads them.
//
// Agreement: every rank of a run must have the same Settings except the ISA caps. items() lists
// every field as named text; agreed_items() those that check_settings_agreement()
// (collectives/mpi_agreement.h) compares across ranks before any communicator is made
// ([Note: environment agreement] in collectives/mpi_agreement.h).
//
// Thread-safety: both readers may be called concurrently (as long as nothing calls setenv).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu_features.h"

namespace zs {

// One named value, as ranks compare them (collectives/mpi_agreement.h, runtime/agreement.h).
struct Setting {
  std::string name;   // e.g. "ZS_COLLECTIVES_SHM", "--lr" or "optimizer.adamw.beta1"
  std::string value;  // its value as text, exactly (floats with enough digits to round-trip)
};

struct Settings {
  // ZS_MAX_ISA: the highest level our kernels may use, in any case; a CPU without that level
  // uses its own highest ([Note: ISA cap] in core/cpu_features.h).
  SimdLevel max_isa = SimdLevel::kAvx512;
  // ZS_FORCE_SCALAR=1: the same as ZS_MAX_ISA=scalar (kept for old scripts).
  bool force_scalar = false;
  // ZS_COLLECTIVES_SHM: MpiCommunicator's shared-memory path for reductions on one node
  // ([Note: shared-memory window] in collectives/mpi_shm.cc); 0 keeps the MPI algorithms.
  bool collectives_shm = true;
  // ZS_COLLECTIVES_SHM_PASS: bytes one rank stages per pass on that path (rounded down to a
  // multiple of 64, at least 8 x the ranks).
  size_t collectives_shm_pass = size_t{512} << 10;
  // ZS_CHECK_COLLECTIVES=1: every collective first checks that the ranks agree on its arguments.
  bool check_collectives = false;
  // ZS_FAKE_NODES=K: make_node_topology() takes the ranks to be spread over K nodes in
  // contiguous blocks (K must divide the world size), to test multi-node paths on one host.
  // 0: the real nodes.
  int fake_nodes = 0;
  // ZS_WATCHDOG_S=T: the collectives' watchdog ([Note: flight recorder] in
  // collectives/flight_recorder.h) ends the job with a report of where each rank is when a
  // collective has not completed after T seconds. 0: off. Unset (empty): the program's default,
  // which is off for MpiCommunicatorOptions and 300 s for zs_train.
  std::optional<double> watchdog_s;
  // ONEDNN_MAX_CPU_ISA as set (e.g. "AVX2"), empty when unset; read only, see the note above.
  std::string onednn_max_cpu_isa;
  // ZS_TEST_SAVE_DELAY_MS=T, for tests only: a background checkpoint write (AsyncSaveOptions,
  // checkpoint/async_checkpoint.h) sleeps T ms before it opens its file, so that a test can
  // overlap writes, kill the job or break the directory while one is in flight. 0: no delay.
  int test_save_delay_ms = 0;
  // ZS_TEST_PAUSE_AFTER_STEP=N, for tests only: zs_train, in a run that starts at step 0, prints
  // "paused after step N" once step N and its saves are done and then sleeps on every rank until
  // it is killed, so that a test kills a job at a known step instead of racing it to the end (a
  // resumed run never pauses: its relaunch must run to the end). 0: no pause.
  int64_t test_pause_after_step = 0;
  // ZS_TEST_PAUSE_AT_RESUME=K, for tests only: zs_train, in a run with --save-dir that resumed
  // from step K, prints "paused after resuming from step K" once the checkpoint is loaded, before
  // its first step, and then sleeps on every rank until it is killed, so that a test kills a
  // relaunch while it restarts. Once per save directory: rank 0 first leaves
  // DIR/.test-paused-at-resume, and a run that finds it there does not pause (the relaunch after
  // the kill resumes from step K again, and must run to the end). 0: no pause.
  int64_t test_pause_at_resume = 0;

  // The defaults above, overridden by each variable of the table that is set and not empty. Reads
  // the environment at every call. Throws zs::Error(kInvalidArgument) for the first bad value (in
  // the table's order), naming the variable, the value and the allowed values, e.g.
  // "ZS_MAX_ISA=avx9: unknown instruction-set cap (allowed: scalar, avx2, avx512)". Every part
  // that reads its settings therefore fails on a bad value of any of them, before doing work.
  static Settings from_environment();

  // Every field above, in the table's order, named by its variable, with its value as the
  // variable spells it ("unset" for an unset ZS_WATCHDOG_S or ONEDNN_MAX_CPU_ISA; seconds with
  // enough digits to round-trip): what ranks compare.
  std::vector<Setting> items() const;
  // items() without the ISA caps (ZS_MAX_ISA, ZS_FORCE_SCALAR), which ranks may set apart: they
  // choose our kernels' paths, every path gives the same bits ([Note: ISA cap] in
  // core/cpu_features.h), and the one other thing they choose, FrozenPolicy's kAuto int8 GEMM,
  // is compared as resolved when an engine is built (engine_settings(), runtime/engine_config.h).
  std::vector<Setting> agreed_items() const;
};

struct LaunchEnvironment {
  // This process's rank among the processes of its node: OMPI_COMM_WORLD_LOCAL_RANK (Open MPI),
  // else MPI_LOCALRANKID (MPICH, Intel MPI), else SLURM_LOCALID (srun); empty when none is set.
  std::optional<int> local_rank;
  // The number of those processes: OMPI_COMM_WORLD_LOCAL_SIZE, else MPI_LOCALNRANKS, else
  // SLURM_NTASKS_PER_NODE; empty when none is set.
  std::optional<int> local_size;
  // OMPI_COMM_WORLD_LOCAL_SIZE alone: what nn::default_threads() divides the cores by. (Why not
  // local_size: SLURM_NTASKS_PER_NODE is also set in a batch script, where one process may own
  // the node's cores.)
  std::optional<int> openmpi_local_size;
  // CUDA_VISIBLE_DEVICES, which the CUDA runtime applies itself; read only to name it in errors.
  std::optional<std::string> cuda_visible_devices;
  // The job this process belongs to, the same for every rank one launch started on one node:
  // PMIX_NAMESPACE (Open MPI 4 and later, PMIx launchers), else OMPI_MCA_ess_base_jobid; empty
  // when neither is set. Names the flight recorder's dump directory.
  std::optional<std::string> job_id;
  // TMPDIR, where temporary files go; empty when unset (then /tmp).
  std::string tmpdir;

  // Reads the variables at every call. Integers are parsed as atoi() does (a launcher writes
  // plain decimals); an empty variable counts as unset, except CUDA_VISIBLE_DEVICES (empty: no
  // device). Never throws.
  static LaunchEnvironment from_environment();
};

}  // namespace zs
