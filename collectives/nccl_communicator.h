// NcclCommunicator: the Communicator over CUDA device memory, on one ncclComm of its own.
//
// Creation: collective over an MPI communicator. Rank 0 makes an ncclUniqueId, MPI_Bcast hands it
// to the others, every rank calls ncclCommInitRank on its current CUDA device (pick it first with
// select_local_device(): one GPU per rank, device/cuda/cuda_allocator.h). split() uses
// ncclCommSplit and needs no MPI.
//
// Buffers: every pointer is device memory on this communicator's device (a CudaCachingAllocator
// Buffer). Counts, in-place rules and argument errors are those of communicator.h; the dtypes are
// fp32, fp16, bf16, fp64 for reductions and additionally int8/uint8 for all_gather and broadcast.
// Reductions on int8/uint8 throw zs::Error(kInvalidArgument) as in the MPI backend.
//
// [Note: NCCL streams and events] Two streams: the compute stream (given at construction, the one
// the model's kernels run on) and a communication stream this object owns. Each collective
//   1. records an event on the compute stream and makes the comm stream wait for it
//      (cudaEventRecord + cudaStreamWaitEvent), so NCCL reads inputs only after the kernels that
//      produced them;
//   2. enqueues the NCCL call on the comm stream;
//   3. records a `done` event on the comm stream.
// Nothing blocks the host: there is no host synchronization anywhere in a collective.
// * A synchronous call (all_gather, ...) then makes the compute stream wait for `done`. When it
//   returns, every kernel enqueued afterwards on the compute stream sees the result. The HOST must
//   still synchronize the compute stream before reading the memory itself.
// * start_*() returns a Work; Work::wait() makes the compute stream wait for `done`
//   (cudaStreamWaitEvent: a stream-ordered wait, it returns at once on the host). Work::test()
//   polls `done` with cudaEventQuery. Buffers must not be written by later compute kernels until
//   wait() was called: that is what orders those kernels after the collective.
// * barrier() is the one host-blocking call: a one-element all-reduce followed by a
//   synchronization of the comm stream. It is for set-up and tests, never inside a step.
//
// Groups: group_start()/group_end() bracket a unit's collectives in ncclGroupStart/End so NCCL
// launches them as one (e.g. the all-gathers of a unit's bf16 shards). Inside a group, the events
// are recorded once for the whole group (at group_start and group_end); Works returned inside a
// group may be waited only after group_end(). NcclGroup is the RAII form.
//
// [Note: NCCL reduction order] NCCL does not follow communicator.h's determinism rule (rank order
// 0..n-1, fp32 accumulation, one rounding at the end). Its reductions run in the buffer's dtype
// along the ring or tree NCCL picks (fp16/bf16 sums are rounded at every hop), so results differ
// from the MpiCommunicator's bits, and kMax does not promise to propagate NaN. They are
// deterministic for a fixed communicator, count, dtype and algorithm (NCCL_ALGO/NCCL_PROTO
// pinned): the same inputs give the same bits call after call, which is what bitwise resume and
// stage-equivalence checks on GPU rely on. Comparing with the CPU backend needs a tolerance.
// kAvg maps to ncclAvg (NCCL >= 2.10).
//
// ByteCounters: counted exactly as communicator.h documents (the ring lower bound), independent
// of the algorithm NCCL actually runs.
//
// Errors: NCCL failures throw zs::Error(kCommunication) naming the call, the rank and the sizes
// and NCCL's error text; asynchronous NCCL errors are reported by Work::test()/wait() and
// check_async_error().
//
// Thread-safety: one thread at a time (the communicator and its Works). Works must be finished or
// destroyed before the communicator is destroyed.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <array>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "collectives/communicator.h"

namespace zs {

// A CUDA device's UUID (cudaDeviceProp::uuid), which names one physical GPU across processes.
using DeviceUuid = std::array<unsigned char, 16>;

// The first pair of ranks (i < j) whose devices are the same GPU, or {-1, -1}. Pure: the
// constructor's "two ranks on one GPU" check over the all-gathered UUIDs.
std::pair<int, int> find_shared_device(std::span<const DeviceUuid> uuid_by_rank);

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm`. Uses the calling thread's current CUDA device; `compute` is the stream
  // collectives are ordered against (nullptr: the legacy default stream). Throws
  // zs::Error(kUnsupported) on every rank when two ranks are on one GPU (their device UUIDs are
  // all-gathered over `comm` first), naming both ranks.
  NcclCommunicator(MPI_Comm comm, cudaStream_t compute);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Over MPI_COMM_WORLD (MPI must be initialised, the device selected).
  static std::unique_ptr<NcclCommunicator> world(cudaStream_t compute);

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void broadcast(void* buf, size_t count, DType dtype, int root) override;
  // Host-blocking; not for use inside a step (see [Note: NCCL streams and events]).
  void barrier() override;
  // Grouped ncclSend/ncclRecv, one pair per peer (the piece for oneself included).
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override;

  WorkHandle start_all_gather(const void* send, void* recv, size_t count, DType dtype) override;
  WorkHandle start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op) override;
  WorkHandle start_all_reduce(const void* send, void* recv, size_t count, DType dtype,
                              ReduceOp op) override;
  WorkHandle start_all_to_all(const void* send, void* recv, size_t count, DType dtype) override;

  // ncclCommSplit: ranks with the same color form a new communicator ordered by (key, old rank),
  // on the same device and compute stream. A negative color returns nullptr for that rank.
  std::unique_ptr<Communicator> split(int color, int key) override;

  const ByteCounters& counters() const override { return counters_; }
  void reset_counters() override { counters_.reset(); }

  // Brackets a unit's collectives in ncclGroupStart/End (see the header comment). Not nestable.
  void group_start();
  void group_end();
  bool in_group() const { return group_ != nullptr; }

  // Throws zs::Error(kCommunication) when NCCL reported an asynchronous error on this comm.
  void check_async_error() const;

  int device() const { return device_; }
  cudaStream_t compute_stream() const { return compute_; }
  // Changes the stream later collectives are ordered against (e.g. a new step's stream).
  void set_compute_stream(cudaStream_t s) { compute_ = s; }
  cudaStream_t comm_stream() const { return comm_stream_; }
  ncclComm_t handle() const { return comm_; }

  // An event from this communicator's pool (shared by the events of one operation or group).
  struct Event;

 private:
  class NcclWork;
  struct Group;

  NcclCommunicator(ncclComm_t comm, int device, cudaStream_t compute);  // for split()
  void init_streams();

  void validate(CollectiveKind kind, const void* send, const void* recv, size_t count, DType dtype,
                ReduceOp op, int root) const;
  void count_bytes(CollectiveKind kind, size_t count, DType dtype, int root);
  void check_nccl(ncclResult_t rc, const char* call, CollectiveKind op, size_t count,
                  DType dtype) const;

  // Steps 1-3 of [Note: NCCL streams and events] around `issue` (which enqueues the NCCL call on
  // the comm stream); returns the `done` event.
  template <typename F>
  std::shared_ptr<Event> enqueue(CollectiveKind kind, size_t count, DType dtype, F&& issue);
  std::shared_ptr<Event> acquire_event();
  void compute_waits(const Event& done);
  void release() noexcept;  // the destructor's work; also undoes a constructor that throws
  void finish_sync(Work& w);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  float* barrier_scratch_ = nullptr;  // [1] fp32, barrier()'s all-reduce
  ByteCounters counters_;
  std::vector<std::shared_ptr<Event>> events_;  // pool; an event is free when use_count() == 1
  std::unique_ptr<Group> group_;
};

// RAII group: NcclGroup g(comm); ...collectives...; (group_end at scope exit). group_end()'s
// errors propagate, except while another exception unwinds the scope (then they are dropped:
// the first error is the one reported).
class NcclGroup {
 public:
  explicit NcclGroup(NcclCommunicator& c) : c_(c), uncaught_(std::uncaught_exceptions()) {
    c_.group_start();
  }
  ~NcclGroup() noexcept(false) {
    if (std::uncaught_exceptions() > uncaught_) {
      try {
        c_.group_end();
      } catch (...) {
      }
      return;
    }
    c_.group_end();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  NcclCommunicator& c_;
  int uncaught_;
};

}  // namespace zs
