// MpiCommunicator: the Communicator over host memory, on an MPI communicator of its own.
//
// Algorithms (see [Note: deterministic reduction] in mpi_communicator.cc):
// * all_gather   = MPI_Allgather / MPI_Iallgather (MPI_IN_PLACE when send == recv + rank*count).
// * reduce_scatter = MPI_Alltoall of the per-rank pieces into scratch (n*count elements), then a
//   local reduction in communicator.h's tree over the ranks in fp32 (fp64 for fp64), rounded once
//   to the dtype;
//   kAvg divides the fp32 sum by n before that rounding. kMax keeps NaN (a NaN from any rank
//   makes the result NaN), so overflow flags survive a max.
// * all_reduce   = reduce_scatter + all_gather over ceil(count/n)-element pieces; counts that do
//   not divide by n are padded into scratch. Same contract, same bits as reduce_scatter.
// * broadcast    = MPI_Bcast; barrier = MPI_Barrier.
// * all_to_all   = MPI_Alltoall / MPI_Ialltoall straight between the caller's buffers (no
//   scratch); pending shared-memory window operations complete first (call order).
// * Shared-memory path ([Note: shared-memory window] in mpi_shm.cc): when every rank of the
//   communicator shares one node (MPI_COMM_TYPE_SHARED gives the same size) and
//   MpiCommunicatorOptions::shared_memory is on (the default; ZS_COLLECTIVES_SHM=0 turns it off),
//   reduce_scatter and all_reduce (sync and async) run over an MPI-3 shared-memory window instead:
//   each rank copies its input for the peers into its slot, a barrier over flags in the window,
//   each rank reduces its piece reading every rank's contribution in the same tree with the same
//   kernel (same bits as the MPI path), and all_reduce copies every reduced piece out after the
//   next barrier. Passes are bounded (512 KiB per rank by default;
//   MpiCommunicatorOptions::shm_pass_bytes, set by ZS_COLLECTIVES_SHM_PASS=bytes, or
//   set_shm_pass_limit()) and rotate over 3 slots per rank, so no pass waits for the readers of the
//   previous one. The window is allocated on first use (collective over the communicator, inside a
//   collective call), grown only when a call needs more, and tracked in MemCategory::kCommBuffers
//   (scratch_allocated() includes it). Asynchronous forms on this path do their work when wait()
//   or test() is first called (test() then blocks until done), earlier window operations first,
//   in start order on every rank. set_shared_memory(false) selects the MPI algorithms above.
//   The window's memory is a file in /dev/shm (Open MPI's osc_sm_backing_directory): before each
//   allocation the node's ranks check the room there together, and too little throws
//   zs::Error(kOutOfMemory) on every rank naming the bytes needed, the bytes free and
//   ZS_COLLECTIVES_SHM=0 (where MPI would hang).
// Per-rank counts above the chunk limit (default 2^30 elements, under MPI's int counts) are split
// into several MPI calls over derived datatypes, so any size that fits in memory works.
//
// Scratch ([Note: scratch pool]): reductions need scratch of n*ceil(count/n) (all_reduce: twice
// that when count % n != 0) elements. The communicator owns a small pool of scratch slots, each a
// zs::Buffer in MemCategory::kCommBuffers. A synchronous call, or an asynchronous one from start
// until its Work completes, holds one slot; a finished Work returns its slot. A slot is allocated
// the first time more operations are in flight at once than there are slots, and grown (freed and
// reallocated) only when a call needs more than the largest free slot holds. reserve(bytes, slots)
// preallocates so that no training step allocates: reserve the largest call's need, times the
// number of reductions a step keeps in flight at once.
//
// Errors: MPI runs with MPI_ERRORS_RETURN on this communicator; a failing MPI call throws
// zs::Error(kCommunication) naming the operation, the rank, the sizes and MPI's error string.
// Argument errors throw zs::Error(kInvalidArgument). With MpiCommunicatorOptions::check_collectives
// (ZS_CHECK_COLLECTIVES=1), every collective first all-reduces the (min, max) of its count, dtype,
// op and root across ranks and throws kCommunication on every rank on a mismatch; without it,
// mismatched counts are reported where MPI detects them (truncation).
//
// Options: the constructors without options take them from the environment at construction
// (MpiCommunicatorOptions::from_environment()); communicators made by split() and split_shared()
// take their parent's. The ranks must agree on the protocol options (shared_memory,
// shm_pass_bytes, check_collectives): the constructor compares them (one MPI_Allgather,
// collectives/mpi_agreement.h) and throws zs::Error(kInvalidArgument) on every rank, naming the
// option and both values, where ranks would otherwise run different protocols and hang.
//
// Thread-safety: one thread at a time (the communicator and its Works). Every Work must be
// finished or destroyed before its communicator is destroyed.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "core/settings.h"

namespace zs {

// What an MpiCommunicator is built with. The defaults are Settings' defaults; from_settings() and
// from_environment() take them from the ZS_* variables ([Note: environment settings] in
// core/settings.h). Every rank must pass the same protocol options (compared at construction);
// watchdog_timeout_s is per process.
struct MpiCommunicatorOptions {
  // The shared-memory path for reductions on one node (ZS_COLLECTIVES_SHM).
  bool shared_memory = Settings{}.collectives_shm;
  // Bytes one rank stages per pass on that path, rounded down to a multiple of 64 and raised to
  // at least 8 x size() (ZS_COLLECTIVES_SHM_PASS).
  size_t shm_pass_bytes = Settings{}.collectives_shm_pass;
  // The (min, max) agreement check before every collective (ZS_CHECK_COLLECTIVES).
  bool check_collectives = Settings{}.check_collectives;
  // Seconds after which the watchdog ends a job stuck in a collective ([Note: flight recorder] in
  // collectives/flight_recorder.h); 0: off (ZS_WATCHDOG_S). The process's watchdog takes it from
  // the first communicator over the whole world made with it on, unless the program set the
  // watchdog before (start_watchdog); communicators made later never change it, whatever theirs
  // (start_watchdog_if_unset). A program that sets the watchdog itself, as zs_train does from
  // --watchdog-timeout, calls start_watchdog once, which wins over every communicator's.
  double watchdog_timeout_s = 0;

  static MpiCommunicatorOptions from_settings(const Settings& s);
  // from_settings(Settings::from_environment()); throws as that does for a bad variable.
  static MpiCommunicatorOptions from_environment();
};

class MpiCommunicator final : public Communicator {
 public:
  // Dups `comm` (collective over it); the dup is freed by the destructor. Without `options`,
  // MpiCommunicatorOptions::from_environment() (which throws zs::Error(kInvalidArgument) for a
  // bad ZS_* variable, before anything is dup'ed). Throws zs::Error(kInvalidArgument) on every
  // rank when the ranks' protocol options differ:
  //   "MpiCommunicator: ranks disagree on shared_memory (ZS_COLLECTIVES_SHM): 1 on rank 0, 0 on
  //   rank 1"
  // (nothing is left allocated).
  explicit MpiCommunicator(MPI_Comm comm);
  MpiCommunicator(MPI_Comm comm, const MpiCommunicatorOptions& options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // A communicator over MPI_COMM_WORLD (MPI must be initialised).
  static std::unique_ptr<MpiCommunicator> world();
  static std::unique_ptr<MpiCommunicator> world(const MpiCommunicatorOptions& options);

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buf, size_t count, DType dtype, int root) override;
  void barrier() override;
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override;

  WorkHandle start_all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  WorkHandle start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op) override;
  WorkHandle start_all_reduce(const void* send, void* recv, size_t count, DType dtype,
                              ReduceOp op) override;
  WorkHandle start_all_to_all(const void* send, void* recv, size_t count, DType dtype) override;

  std::unique_ptr<Communicator> split(int color, int key) override;
  // Ranks that share memory (one node): MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), keyed by rank.
  std::unique_ptr<MpiCommunicator> split_shared();

  const ByteCounters& counters() const override { return counters_; }
  void reset_counters() override { counters_.reset(); }

  // Preallocates `slots` scratch slots of at least `bytes` bytes each (see [Note: scratch pool]).
  // The bytes a call needs are given by scratch_bytes().
  void reserve(size_t bytes, int slots = 1);
  // Scratch bytes one reduce_scatter (per-rank count) or all_reduce (total count) needs here.
  size_t scratch_bytes(CollectiveKind kind, size_t count, DType dtype) const;
  // Bytes of scratch currently allocated, over all slots.
  size_t scratch_allocated() const;

  // Splits MPI calls into pieces of at most `elements` per rank (default 2^30). Exposed so tests
  // can cover the chunked path with small counts; results do not depend on it.
  void set_chunk_limit(size_t elements);
  // Whether reduce_scatter/all_reduce use the shared-memory window (see the header comment).
  bool shared_memory() const { return shm_on_; }
  // Collective (every rank alike): turns the shared path on or off; completes pending window
  // operations first. Turning it on is a no-op where the ranks do not share one node.
  void set_shared_memory(bool enable);
  // Bytes one rank stages per pass on the shared path (default 512 KiB, at least 8 * size()).
  // Exposed so tests can cover multi-pass calls; results do not depend on it. Collective.
  void set_shm_pass_limit(size_t bytes);
  size_t shm_pass_limit() const { return shm_slot_limit_; }

  // Whether the (min, max) argument check runs before each collective (check_collectives).
  bool checking() const { return options_.check_collectives; }
  // The options this communicator was built with, shared_memory as set_shared_memory() left it;
  // what split() and split_shared() pass on.
  const MpiCommunicatorOptions& options() const { return options_; }

  MPI_Comm handle() const { return comm_; }

 private:
  class AllGatherWork;  // also the all-to-all's (requests only, no scratch)
  class ReduceScatterWork;
  class AllReduceWork;
  class ShmWork;
  class RecordedWork;
  // [Note: flight recorder]: records a collective of this communicator when it spans the world.
  struct Record {
    uint64_t seq = 0;
    ~Record();
  };
  uint64_t record_begin(CollectiveKind kind, size_t count, DType dtype);
  WorkHandle recorded(WorkHandle w, uint64_t seq);
  struct Slot {
    Buffer buf;
    bool in_use = false;
  };

  // Argument checks shared by every entry point; throws with the op's name.
  void validate(CollectiveKind kind, const void* send, const void* recv, size_t count, DType dtype,
                ReduceOp op, int root) const;
  void check_agreement(CollectiveKind kind, size_t count, DType dtype, ReduceOp op, int root);
  // [Note: two-rank sums] in mpi_collectives.cc: the synchronous all-reduce of fp32/fp64 sums on
  // two ranks, up to kPairDirectBytes, is MPI_Allreduce itself.
  static constexpr size_t kPairDirectBytes = size_t{4} << 20;
  bool pair_sum_direct(size_t count, DType dtype, ReduceOp op) const;
  // [Note: one rank] in mpi_collectives.cc: a collective over one rank, as a copy.
  void solo(const void* send, void* recv, size_t count, DType dtype);
  void count_bytes(CollectiveKind kind, size_t count, DType dtype, int root);

  Slot* acquire(size_t bytes);
  void release(Slot* slot);

  // Chunked MPI primitives; each returns after posting (requests appended) when reqs != nullptr,
  // else blocks. `op` names the caller in errors.
  void allgather_raw(const void* send, void* recv, size_t count, DType dtype,
                     std::vector<MPI_Request>* reqs, CollectiveKind op, MPI_Comm comm);
  void alltoall_raw(const void* send, void* recv, size_t count, DType dtype,
                    std::vector<MPI_Request>* reqs, CollectiveKind op);
  // all_to_all's checks and counting; returns the flight-recorder entry.
  uint64_t begin_all_to_all(const void* send, const void* recv, size_t count, DType dtype);
  void bcast_raw(void* buf, size_t count, DType dtype, int root);
  // Holds a slot for a synchronous call; returns it on scope exit, exceptions included.
  struct SlotGuard {
    MpiCommunicator* comm;
    Slot* slot;
    ~SlotGuard() { comm->release(slot); }
  };
  // Throws kCommunication when rc != MPI_SUCCESS.
  void check_mpi(int rc, const char* call, CollectiveKind op, size_t count, DType dtype) const;

  // Async all_reduce second phases are posted on phase2_comm_ strictly in start order, whatever
  // order the ranks test or wait in, so the MPI collectives always match across ranks.
  void advance_phase2(AllReduceWork* upto, bool block);
  bool retire_phase1(AllReduceWork* w, bool block);

  // Shared-memory path (mpi_shm.cc).
  void shm_init();
  void shm_free();
  void shm_reserve(size_t slot_bytes);
  // Throws on every rank of shm_comm_ when the window's backing file system lacks the room for
  // segments of `segment` bytes ([Note: shared-memory window]).
  void shm_check_space(size_t segment);
  void shm_run(CollectiveKind kind, const void* send, void* recv, size_t count, DType dtype,
               ReduceOp op);
  // shm_run's two protocols over `cap` elements per slot and pass (the window reserved, the
  // sources sized): passes of reduce-scatter blocks, and all_reduce's pipelined passes.
  void shm_reduce_scatter(const char* in, char* out, size_t count, size_t cap, DType dtype,
                          ReduceOp op);
  void shm_all_reduce(const char* in, char* out, size_t count, size_t cap, DType dtype,
                      ReduceOp op);
  WorkHandle shm_start(CollectiveKind kind, const void* send, void* recv, size_t count, DType dtype,
                       ReduceOp op);
  void shm_drain(ShmWork* upto);  // runs queued window operations in start order, up to `upto`
  size_t shm_allocated() const;   // bytes of this rank's window segment (0 without a window)
  void shm_sync();                // a barrier over counters in the window (flag protocol)
  char* shm_ctrl(int rank);       // rank's segment: its counter line, then its 3 slots
  uint64_t* shm_counter(int rank);
  char* shm_slot(int rank, int buffer);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm phase2_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  MpiCommunicatorOptions options_;
  bool record_ = false;  // this communicator spans MPI_COMM_WORLD's ranks
  size_t chunk_limit_ = size_t{1} << 30;
  ByteCounters counters_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<AllReduceWork*> pending_phase2_;
  MPI_Comm shm_comm_ = MPI_COMM_NULL;  // same ranks as comm_, when they share one node
  bool shm_on_ = false;                // options_.shared_memory and one node
  MPI_Win shm_win_ = MPI_WIN_NULL;
  char* shm_base_ = nullptr;  // rank 0's segment; rank r's segment follows r-1's
  size_t shm_slot_ = 0;       // bytes of one slot (one rank, one of 3 buffers)
  size_t shm_slot_limit_ = 0;
  uint64_t shm_epoch_ = 0;  // shm_sync() calls since the window was allocated
  uint64_t shm_pass_ = 0;   // passes run so far; pass p uses buffer p % 3
  std::deque<ShmWork*> shm_pending_;
  std::vector<const void*> shm_srcs_;  // per-call source pointers, kept to avoid reallocating
};

}  // namespace zs
