// Run-wide agreement over a raw MPI communicator: checks that run before any communicator can be
// trusted, because ranks that differ in them would run different protocols and hang.
//
// check_agreement compares a list of named values (Setting, core/settings.h) across the ranks of
// an MPI_Comm with one MPI_Allgather of a 64-bit hash. Only when they differ does it find the
// lowest rank that differs from rank 0 and the first setting where it does; every rank then
// throws the same zs::Error(kInvalidArgument):
//   "<what>: ranks disagree on <name>: <value> on rank 0, <value> on rank r"
// runtime/agreement.h's check_agreement(Communicator&, ...) is the same comparison (the same
// code, through AgreementTransport) over a Communicator.
//
// [Note: environment agreement] Where it runs:
// * a program, right after MPI_Init and before it makes any communicator:
//   check_settings_agreement(MPI_COMM_WORLD, settings), over every field of Settings but the ISA
//   caps (Settings::agreed_items(): ranks may differ in ZS_MAX_ISA and ZS_FORCE_SCALAR, whose
//   paths give the same bits);
// * MpiCommunicator's constructor, over its protocol options (shared_memory, shm_pass_bytes,
//   check_collectives), before the shared-memory window's set-up;
// * make_node_topology(), over fake_nodes, before any split.
//
// Collective over `comm`: every rank calls it at the same point. Thread-safety: one thread.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "core/settings.h"

namespace zs {

// Throws zs::Error(kInvalidArgument) on every rank of `comm` when the lists differ between
// ranks, naming the first differing setting and both values (or, when the lists differ in length
// or names, the first position where they do); returns normally on every rank when they are all
// equal. A failing MPI call goes to `comm`'s error handler; when that returns (MPI_ERRORS_RETURN),
// it throws zs::Error(kCommunication).
void check_agreement(MPI_Comm comm, std::span<const Setting> settings, std::string_view what);

// The environment's settings, every field of Settings but the ISA caps (Settings::agreed_items():
// ZS_COLLECTIVES_*, ZS_CHECK_COLLECTIVES, ZS_FAKE_NODES, ZS_WATCHDOG_S, ONEDNN_MAX_CPU_ISA),
// compared across `comm`:
//   "environment: ranks disagree on ZS_COLLECTIVES_SHM: 1 on rank 0, 0 on rank 1"
void check_settings_agreement(MPI_Comm comm, const Settings& settings);

// What check_agreement needs from the ranks: both functions are collective over them.
struct AgreementTransport {
  int rank = 0;
  int size = 1;
  // Every rank's `mine`, in rank order.
  std::function<std::vector<uint64_t>(uint64_t mine)> all_gather;
  // `bytes` bytes at `buf` on rank `root` to `buf` on every rank.
  std::function<void(void* buf, size_t bytes, int root)> broadcast;
};

// fail_together (collectives/fail_together.h, the same contract) over a raw MPI_Comm: for the
// checks a program runs before it has a communicator (reading the environment's settings).
void fail_together(MPI_Comm comm, const std::function<void()>& work);

// The comparison itself, over any transport (the MPI_Comm form above and runtime/agreement.h's
// Communicator form are this one).
void check_agreement(const AgreementTransport& t, std::span<const Setting> settings,
                     std::string_view what);

}  // namespace zs
