// The backend-neutral communicator, shaped like NCCL's API.
//
// Every collective takes (send, recv, count, dtype, [op]) in that order; `count` is always a
// per-rank element count (the size of one rank's piece), as in NCCL. Buffers live on the
// communicator's device (host memory for MpiCommunicator, device memory for NcclCommunicator).
//
// Reductions:
// * ops: kSum, kAvg (sum then divide by size()), kMax. Defined for fp32, fp16, bf16 and fp64;
//   int8/uint8 reductions are rejected with zs::Error(kInvalidArgument).
// * Determinism: reductions add the ranks' contributions in one fixed binary tree over the rank
//   index (tree(lo, hi) = tree(lo, mid) + tree(mid, hi), mid = lo + ceil((hi - lo) / 2): the
//   balanced tree for powers of two, rank order for up to 3 ranks; [Note: deterministic
//   reduction] in collectives/reduce_kernels.cc), in fp32 (fp64 for fp64), and round once to the
//   buffer dtype at the end. Sums of fp16/bf16 thus accumulate in fp32 per element and are rounded
//   once. The same inputs give the same bits for every call, message size and chunking: the ZeRO
//   stages rely on it, and the world-invariant mode on the tree's shape.
//
// Asynchronous forms (start_*) return a Work handle; buffers must stay untouched until wait()
// returns. Collectives must be called in the same order on every rank (MPI's rule).
//
// Errors: null buffers with a non-zero count, counts whose byte size overflows, reductions on
// integer types, a root outside [0, size()), and counts that differ between ranks where it can be
// detected throw zs::Error naming the operation, the rank and the sizes.
//
// Thread-safety: a communicator is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace zs {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax };
std::string_view reduce_op_name(ReduceOp op);

enum class CollectiveKind : int {
  kAllGather = 0,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kBarrier,
  kAllToAll,
  kCount
};
std::string_view collective_kind_name(CollectiveKind k);

// Bytes this rank sent and received, per kind of collective. Counted by the algorithm-independent
// lower bound of a ring: all-gather and reduce-scatter of per-rank count c move (n-1)*c elements
// each way; all-reduce of c elements moves 2*(n-1)*ceil(c/n) each way; broadcast counts c*(n-1)
// sent at the root and c received elsewhere; all-to-all of c elements per peer moves (n-1)*c each
// way (the piece a rank keeps for itself does not move). With n == 1 nothing moves.
struct ByteCounters {
  int64_t sent[static_cast<int>(CollectiveKind::kCount)] = {};
  int64_t received[static_cast<int>(CollectiveKind::kCount)] = {};
  int64_t calls[static_cast<int>(CollectiveKind::kCount)] = {};
  int64_t total_sent() const;
  int64_t total_received() const;
  void reset() { *this = ByteCounters{}; }
  // Adds one call of `kind` with per-rank `count` elements of `dtype` by the rules above, as seen
  // by `rank` of `size` ranks (root: the broadcast root). Backends call it once per collective.
  void record(CollectiveKind kind, size_t count, DType dtype, int root, int rank, int size);
};

// The argument checks every backend runs before a collective (one path, one set of messages):
// reductions only on float dtypes and valid ops, no size_t overflow of count x element size x
// ranks, no null buffer with a non-zero count, a broadcast root in [0, size). Throws
// zs::Error(kInvalidArgument) naming the operation, the rank and the sizes.
void check_collective_args(CollectiveKind kind, const void* send, const void* recv, size_t count,
                           DType dtype, ReduceOp op, int root, int rank, int size);

// A pending asynchronous collective. wait() blocks until it is complete and its results are in
// the receive buffer; it may be called once; test() polls without blocking. Destroying an
// unfinished Work waits for it.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};
using WorkHandle = std::unique_ptr<Work>;

// A Work that is already complete (nothing left to do).
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // recv[r*count .. (r+1)*count) = rank r's send[0..count). In place when
  // send == recv + rank()*count (in elements).
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  // recv[0..count) = op over ranks r of rank r's send[rank()*count .. (rank()+1)*count).
  // send holds size()*count elements. In place when recv == send + rank()*count.
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                              ReduceOp op) = 0;
  // recv[0..count) = op over ranks of send[0..count). count need not divide by size().
  // In place when send == recv.
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  // buf[0..count) on every rank = root's buf. Any dtype.
  virtual void broadcast(void* buf, size_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  // recv[r*count .. (r+1)*count) = rank r's send[rank()*count .. (rank()+1)*count): every rank
  // sends its r-th piece of `count` elements to rank r. Any dtype (data is only moved). Never in
  // place: send and recv (size()*count elements each) must not overlap.
  virtual void all_to_all(const void* send, void* recv, size_t count, DType dtype) = 0;

  virtual WorkHandle start_all_gather(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual WorkHandle start_reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                          ReduceOp op) = 0;
  virtual WorkHandle start_all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                      ReduceOp op) = 0;
  virtual WorkHandle start_all_to_all(const void* send, void* recv, size_t count, DType dtype) = 0;

  // Collective over this communicator: ranks with the same color form a new communicator,
  // ordered by (key, old rank). A negative color returns nullptr for that rank.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  virtual const ByteCounters& counters() const = 0;
  virtual void reset_counters() = 0;
};

// `root`'s `s` on every rank (its length, then its bytes). Collective; `comm` must work on host
// buffers (an MpiCommunicator or a host-side hierarchical one).
std::string broadcast_string(Communicator& comm, const std::string& s, int root = 0);

}  // namespace zs
