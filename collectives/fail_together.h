// Fail together: every rank of a communicator runs its part of a piece of work, and when any rank
// fails, every rank fails with the same error, so that no rank is left waiting in the next
// collective. The one form of it for the library (checkpoints, safetensors, the save directory)
// and the programs; collectives/mpi_agreement.h has the same over a raw MPI_Comm, for the checks
// that run before any communicator exists.
//
// Thread-safety: one thread at a time per communicator, as for every collective.
#pragma once

#include <functional>
#include <string>

#include "collectives/communicator.h"
#include "core/error.h"

namespace zs {

// The error every rank throws when some rank failed: a zs::Error whose code and message are the
// lowest failing rank's. Thread-safety: immutable after construction.
class RankFailure : public Error {
 public:
  // what(): "rank <rank>: <cause>" when size > 1, else just <cause>.
  RankFailure(ErrorCode code, int rank, int size, std::string cause);
  // The lowest rank that failed.
  int rank() const { return rank_; }
  // That rank's own message, without the "rank r: " prefix (what a program prints once).
  const std::string& cause() const { return cause_; }

 private:
  int rank_;
  std::string cause_;
};

// Runs work() on this rank, then agrees with every rank of `comm` (one all-reduce of one double;
// on failure, two broadcasts from the failing rank). What every rank sees:
// * no rank threw: fail_together returns normally on every rank;
// * some ranks threw: every rank, the ones that did not throw included, throws the same
//   RankFailure naming the lowest rank r that threw, with r's code and message:
//     zs::Error(code, m)        -> code, m
//     std::bad_alloc            -> kOutOfMemory, "out of host memory"
//     other std::exception e    -> kInternal, e.what()
//   what() is "rank r: m" on a communicator of several ranks, m alone on one rank.
// An exception not derived from std::exception is not caught (it propagates on its rank only).
// Collective over `comm`, whose buffers must be host memory (MpiCommunicator): every rank calls
// it at the same point.
void fail_together(Communicator& comm, const std::function<void()>& work);

// The transport fail_together needs from the ranks (both functions collective over them): the
// MPI_Comm form in collectives/mpi_agreement.h and the Communicator form above run through it.
struct FailTransport {
  int rank = 0;
  int size = 1;
  // The maximum of every rank's `mine`.
  std::function<double(double mine)> all_reduce_max;
  // `bytes` bytes at `buf` on rank `root` to `buf` on every rank.
  std::function<void(void* buf, size_t bytes, int root)> broadcast;
};

// fail_together over any transport (the contract above).
void fail_together(const FailTransport& t, const std::function<void()>& work);

}  // namespace zs
