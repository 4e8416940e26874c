// HierarchicalCommunicator: the Communicator over a world MpiCommunicator whose all-gather,
// reduce-scatter and all-reduce run in two levels, within each node (the node-local communicator:
// shared memory) and across nodes (the cross-node communicator: one rank per node, the network),
// and byte counters split by link class.
//
// [Note: hierarchical collectives]
// Topology: make_node_topology() (collectives/topology.h) splits the world into `local` (the L
// ranks of this node, by world rank) and `cross` (the N ranks with this local rank, one per node,
// by world rank). W(k, l) is the world rank with cross rank k and local rank l (block placement,
// Open MPI's default and ZS_FAKE_NODES': W(k, l) = k*L + l). The two-level algorithms run when
// every node has the same L, N > 1 and L > 1 (hierarchical() is then true); otherwise (one node,
// one rank per node, nodes of different sizes) or after set_hierarchical(false), every collective
// is the world's flat one. c is the per-rank count, n = N*L.
//
// all_gather:     (1) across nodes: all-gather of this rank's c elements over `cross` into scratch;
//                 (2) within the node: all-gather of those N*c elements over `local`; (3) a local
//                 copy moves piece (l, k) to W(k, l)*c of recv. Data movement only: the result is
//                 the flat all-gather's, bit for bit, for any dtype.
// reduce_scatter: (1) a local copy orders the n*c inputs by (local rank, cross rank) and widens
//                 them to the accumulator type A (fp32; fp64 for fp64); (2) within the node:
//                 reduce-scatter of N*c A-elements over `local` (this rank gets its node's partial
//                 sums of the blocks of W(0, l) .. W(N-1, l)); (3) across nodes: reduce-scatter of
//                 c A-elements over `cross`; (4) kAvg divides by n; one rounding to the dtype.
// all_reduce:     (1) widen into a zero-padded scratch of L*ceil(c/L) A-elements; (2) within the
//                 node: reduce-scatter (this rank's piece of ceil(c/L) partial sums); (3) across
//                 nodes: all-reduce of the piece over `cross`; (4) kAvg divides by n, one rounding
//                 to the dtype; (5) within the node: all-gather of the rounded pieces (dtype).
//
// Reduction order (this replaces communicator.h's "rank order 0..n-1" for the two reductions):
// for every element,
//     result = round_to_dtype( sum_{k = 0..N-1} ( sum_{l = 0..L-1} x[W(k, l)] ) )
// with both sums taken left to right in A: the inner one over the local ranks of one node in
// local-rank order (the node-local reduce-scatter's rank order), the outer one over the nodes'
// partial sums in cross-rank order (the order of the nodes by world rank, node order for block
// and round-robin placements). Every addition rounds to A, as the flat reduction's do; the node
// partials stay in A (fp32 even for fp16/bf16 inputs: they cross the network as fp32, twice the
// bytes of the dtype), so there is exactly one rounding to the buffer dtype, at the end (after
// the division by n for kAvg). kMax is exact and order-free: the flat result's bits (a NaN
// anywhere gives NaN).
// Against the flat order: the flat sum is ((x0 + x1) + x2) + ...; the hierarchical one regroups
// it into per-node partials. The two give the same bits when every partial sum is exact in A
// (e.g. integer-valued data with |sums| < 2^24), and in general agree within fp32 rounding: both
// are within (n-1)·u·sum|x| of the exact sum (u = 2^-24, 2^-53 for fp64) before the final
// rounding to the dtype, which may then differ by one unit in the last place of the dtype.
//
// Asynchronous forms: start_* runs the node-local first step of a reduction synchronously and
// posts the cross-node step as a non-blocking collective; the remaining steps run when the Work
// is waited for. At most one hierarchical operation is pending: every other call on this
// communicator (any collective, synchronous or not, split, set_hierarchical, reset_counters) first
// completes it, and test() completes it (blocking on the node-local last step) once its
// cross-node step is done. Operations therefore always run in call order on every rank, whatever
// order the ranks wait in; an all-gather's or reduction's network step overlaps with what the
// caller does until its next call. While one is pending, collectives called directly on the world
// communicator (or on any other communicator over these ranks) may deadlock against its
// remaining node-local step: wait for it first, or go through this communicator. Likewise a flat
// Work (set_hierarchical(false)) must be complete before set_hierarchical(true).
//
// broadcast, barrier, all_to_all (and start_all_to_all) and split are the world's (flat).
//
// [Note: link counters]
// counters() is communicator.h's ByteCounters for the top-level calls: calls per collective;
// bytes by the ring lower bound of the flat collective in flat mode, and the sum of the
// sub-collectives' ring lower bounds (each by ByteCounters::record over its sub-communicator, in
// its own dtype: A for the reduction steps) in hierarchical mode. link_counters() splits the same
// bytes by link class:
// * hierarchical: intra_node = the sub-collectives over `local`, inter_node = those over `cross`.
//   Per rank, c elements of e bytes (a = the accumulator's bytes), p = ceil(c/L):
//     all_gather       intra (L-1)·N·c·e        inter (N-1)·c·e
//     reduce_scatter   intra (L-1)·N·c·a        inter (N-1)·c·a
//     all_reduce       intra (L-1)·p·(a + e)    inter 2(N-1)·ceil(p/N)·a
//   each way (sent = received).
// * flat (record_flat_links): the ring lower bound with the ranks in node-major order. A ring
//   collective moves B bytes each way per rank (B of communicator.h: (n-1)·c·e, all-reduce
//   2(n-1)·ceil(c/n)·e); in the ring k*L+l -> k*L+l+1 only the edge out of the last rank of a node
//   crosses nodes, so the rank with l = L-1 sends its B inter-node and the rank with l = 0
//   receives its B inter-node; all else is intra-node (everything when N = 1, nothing when
//   L = 1). all_to_all (c per peer, direct exchanges): (L-1)·c·e intra-node and (n-L)·c·e
//   inter-node, each way, on every rank. broadcast (the root sends c to each of the others): the
//   root's sends to ranks on other nodes, and a receiver's c when the root is on another node, are
//   inter-node. The model is a lower bound, not what MPI's algorithm moves: e.g. the flat
//   reduce-scatter of MpiCommunicator is an all-to-all, which sends (n-L)·c·e per rank across
//   nodes.
// * calls, in each class: top-level calls of that kind whose algorithm uses that class (every
//   call where the class exists: L > 1 for intra_node, N > 1 for inter_node).
//
// Scratch: all_gather n·c·e bytes, reduce_scatter n·c·a, all_reduce L·p·(a + e), held in two
// buffers (MemCategory::kCommBuffers) grown when a call needs more (reserve() preallocates); the
// sub-communicators keep their own (MpiCommunicator's [Note: scratch pool]).
//
// Thread-safety: one thread at a time. The world communicator must outlive this one, and a
// pending Work must be finished or destroyed before this communicator is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/mpi_communicator.h"
#include "core/buffer.h"

namespace zs {

// Bytes by link class ([Note: link counters]).
struct LinkCounters {
  ByteCounters intra_node;  // links within a node (shared memory)
  ByteCounters inter_node;  // links between nodes (the network)
  void reset() { *this = LinkCounters{}; }
};

// Where one rank sits, for the flat link model.
struct RankPlace {
  int rank = 0;  // in the world
  int size = 1;
  int node = 0;  // node index
  int num_nodes = 1;
  int local_rank = 0;  // on its node
  int local_size = 1;
};

// Adds one flat collective of per-rank `count` elements (all-reduce: total count; broadcast: the
// root's count) to `into` as the ring lower bound in node-major order places it ([Note: link
// counters]). `root` and `root_node`: the broadcast's root and its node (ignored otherwise). A
// pure function: the model, testable without communication.
void record_flat_links(LinkCounters& into, CollectiveKind kind, size_t count, DType dtype,
                       const RankPlace& me, int root, int root_node);

class HierarchicalCommunicator final : public Communicator {
 public:
  // Collective over `world` (which must outlive this). Nodes as make_node_topology(world) finds
  // them: MPI's shared-memory split, or ZS_FAKE_NODES=K (Settings) contiguous blocks; throws
  // zs::Error(kInvalidArgument) for a bad ZS_* variable.
  explicit HierarchicalCommunicator(MpiCommunicator& world);
  // The same with fake_nodes as make_node_topology(world, fake_nodes): 0 = the real nodes, K >= 1
  // = K contiguous blocks (K must divide the world size). Every rank must pass the same value.
  HierarchicalCommunicator(MpiCommunicator& world, int fake_nodes);
  ~HierarchicalCommunicator() override;
  HierarchicalCommunicator(const HierarchicalCommunicator&) = delete;
  HierarchicalCommunicator& operator=(const HierarchicalCommunicator&) = delete;

  int rank() const override { return me_.rank; }
  int size() const override { return me_.size; }

  // Contracts of communicator.h, with the algorithms and reduction order of the Note.
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

  // The world's split (an MpiCommunicator, flat).
  std::unique_ptr<Communicator> split(int color, int key) override;

  const ByteCounters& counters() const override { return counters_; }
  // Resets counters() and link_counters() (completes a pending operation first).
  void reset_counters() override;
  const LinkCounters& link_counters() const { return links_; }

  // Whether the two-level algorithms run: possible here (uniform nodes, N > 1, L > 1) and not
  // turned off by set_hierarchical(false).
  bool hierarchical() const { return use_hier_; }
  // Whether the layout allows them at all.
  bool hierarchical_possible() const { return hier_possible_; }
  // Every rank alike: false selects the world's flat collectives (link bytes by the model), true
  // the two-level ones where possible. Completes a pending operation first.
  void set_hierarchical(bool enable);

  int num_nodes() const { return me_.num_nodes; }
  int node_index() const { return me_.node; }
  int local_rank() const { return me_.local_rank; }
  int local_size() const { return me_.local_size; }
  // W(k, l) of the Note: the world rank with cross rank k and local rank l (uniform nodes only;
  // -1 otherwise or out of range).
  int world_rank_of(int cross_rank, int local_rank) const;

  // Scratch bytes one call needs here (both buffers), and preallocation of that much.
  size_t scratch_bytes(CollectiveKind kind, size_t count, DType dtype) const;
  void reserve(CollectiveKind kind, size_t count, DType dtype);

 private:
  class PendingWork;
  struct Sizes {
    size_t acc = 0;  // bytes of the accumulator scratch
    size_t out = 0;  // bytes of the dtype scratch
  };
  Sizes scratch_sizes(CollectiveKind kind, size_t count, DType dtype) const;
  void ensure_scratch(const Sizes& s);
  void complete_pending();
  // Counts one top-level call; `intra`/`inter` are the bytes of its sub-collectives (each way).
  void count_hier(CollectiveKind kind, int64_t intra, int64_t inter);
  void count_flat(CollectiveKind kind, size_t count, DType dtype, int root);
  WorkHandle start_hier(CollectiveKind kind, const void* send, void* recv, size_t count,
                        DType dtype, ReduceOp op);
  // The steps after the cross-node one (see the Note); run by PendingWork.
  void finish_hier(PendingWork& w);

  MpiCommunicator& world_;
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> cross_;
  RankPlace me_;
  int cross_rank_ = 0;
  std::vector<int> world_of_;  // [k * L + l] = W(k, l), when uniform
  std::vector<int> node_of_;   // [world rank] = node index
  bool hier_possible_ = false;
  bool use_hier_ = false;
  ByteCounters counters_;
  LinkCounters links_;
  Buffer acc_;  // accumulator scratch (A elements)
  Buffer out_;  // dtype scratch
  PendingWork* pending_ = nullptr;
};

}  // namespace zs
