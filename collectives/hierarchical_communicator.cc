#include "collectives/hierarchical_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "collectives/flight_recorder.h"
#include "collectives/topology.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/settings.h"

namespace zs {
namespace {

int at(CollectiveKind k) { return static_cast<int>(k); }
size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
char* bytes(void* p) { return static_cast<char*>(p); }
const char* bytes(const void* p) { return static_cast<const char*>(p); }

// The accumulator type of the reductions: fp32, fp64 for fp64 (reduce_kernels.h's).
DType acc_type(DType dt) { return dt == DType::kF64 ? DType::kF64 : DType::kF32; }

// Bytes one ring collective moves each way on `rank` of `size` (communicator.h's formulas).
int64_t ring_bytes(CollectiveKind kind, size_t count, DType dt, int rank, int size) {
  ByteCounters t;
  t.record(kind, count, dt, 0, rank, size);
  return t.sent[at(kind)];
}

// dst[0..n) (acc type) = src[0..n) (dtype), exactly.
void widen(const void* src, DType dt, void* dst, size_t n) {
  if (dt == DType::kF64) {
    std::memcpy(dst, src, n * sizeof(double));
  } else {
    convert(src, dt, dst, DType::kF32, n);
  }
}

// dst[0..n) (dtype) = src[0..n) (acc type) / n_ranks for kAvg, rounded once. src is divided in
// place first.
void finish_values(void* src, DType dt, ReduceOp op, int n_ranks, void* dst, size_t n) {
  if (dt == DType::kF64) {
    double* s = static_cast<double*>(src);
    if (op == ReduceOp::kAvg) {
      const double d = static_cast<double>(n_ranks);
      for (size_t i = 0; i < n; ++i) s[i] /= d;
    }
    if (dst != src) std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  float* s = static_cast<float*>(src);
  if (op == ReduceOp::kAvg) {
    // The flat reduction's division (reduce_kernels.cc: acc /= float(n)), before the rounding.
    const float d = static_cast<float>(n_ranks);
    for (size_t i = 0; i < n; ++i) s[i] /= d;
  }
  if (dst != src) convert(src, DType::kF32, dst, dt, n);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The flat link model

void record_flat_links(LinkCounters& into, CollectiveKind kind, size_t count, DType dtype,
                       const RankPlace& me, int root, int root_node) {
  const int k = at(kind);
  const bool has_intra = me.local_size > 1;
  const bool has_inter = me.num_nodes > 1;
  if (has_intra) into.intra_node.calls[k] += 1;
  if (has_inter) into.inter_node.calls[k] += 1;
  if (me.size == 1) return;
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  const int64_t c = static_cast<int64_t>(count) * e;
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllReduce: {
      const int64_t b = ring_bytes(kind, count, dtype, me.rank, me.size);
      // Node-major ring: the edge out of a node's last rank and into its first rank cross nodes.
      const bool send_inter = has_inter && me.local_rank == me.local_size - 1;
      const bool recv_inter = has_inter && me.local_rank == 0;
      (send_inter ? into.inter_node : into.intra_node).sent[k] += b;
      (recv_inter ? into.inter_node : into.intra_node).received[k] += b;
      break;
    }
    case CollectiveKind::kAllToAll: {
      // Direct exchanges: c to each of the L-1 ranks of this node, c to each of the n-L others.
      const int64_t intra = c * (me.local_size - 1), inter = c * (me.size - me.local_size);
      into.intra_node.sent[k] += intra;
      into.intra_node.received[k] += intra;
      into.inter_node.sent[k] += inter;
      into.inter_node.received[k] += inter;
      break;
    }
    case CollectiveKind::kBroadcast:
      if (me.rank == root) {
        const int64_t others_here = me.local_size - 1;
        const int64_t elsewhere = me.size - me.local_size;
        into.intra_node.sent[k] += c * others_here;
        into.inter_node.sent[k] += c * elsewhere;
      } else {
        (root_node == me.node ? into.intra_node : into.inter_node).received[k] += c;
      }
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// The pending operation

// One hierarchical operation from its start until its last steps have run (see the Note).
class HierarchicalCommunicator::PendingWork final : public Work {
 public:
  PendingWork(HierarchicalCommunicator* c, CollectiveKind kind, void* recv, size_t count, DType dt,
              ReduceOp op)
      : c_(c), kind(kind), recv(recv), count(count), dt(dt), op(op) {}
  ~PendingWork() override {
    if (armed()) {
      try {
        wait();
      } catch (...) {  // a destructor cannot report; wait() explicitly to see errors
      }
    }
    if (c_->pending_ == this) c_->pending_ = nullptr;
    if (seq != 0) flight_recorder().finish(seq);
  }
  void wait() override {
    if (armed()) c_->complete_pending();
  }
  bool test() override {
    if (!armed()) return true;
    if (cross && !cross->test()) return false;
    c_->complete_pending();
    return true;
  }
  // Runs the steps after the cross-node one; called through complete_pending() only.
  void finish() {
    done_ = true;  // first: an exception leaves nothing to retry
    if (c_->pending_ == this) c_->pending_ = nullptr;
    if (cross) cross->wait();
    cross.reset();
    c_->finish_hier(*this);
    if (seq != 0) flight_recorder().finish(seq);
    seq = 0;
  }

  HierarchicalCommunicator* c_;
  CollectiveKind kind;
  void* recv;
  size_t count;
  DType dt;
  ReduceOp op;
  WorkHandle cross;      // the cross-node step, posted at start
  uint64_t seq = 0;      // [Note: flight recorder] entry
  char* mine = nullptr;  // this rank's result in scratch (reductions) or its block (all-gather)

 private:
  // Pending: started and not finished. (A start that threw never became pending.)
  bool armed() const { return !done_ && c_->pending_ == this; }
  bool done_ = false;
};

// ---------------------------------------------------------------------------------------------
// Construction

HierarchicalCommunicator::HierarchicalCommunicator(MpiCommunicator& world)
    : HierarchicalCommunicator(world, Settings::from_environment().fake_nodes) {}

HierarchicalCommunicator::HierarchicalCommunicator(MpiCommunicator& world, int fake_nodes)
    : world_(world) {
  NodeTopology t = make_node_topology(world, fake_nodes);
  local_ = std::move(t.local);
  cross_ = std::move(t.cross);
  me_.rank = world.rank();
  me_.size = world.size();
  me_.node = t.node_index;
  me_.num_nodes = t.num_nodes;
  me_.local_rank = t.local_rank;
  me_.local_size = t.local_size;
  cross_rank_ = cross_->rank();
  // Why an all-gather of every rank's place: the permutations of the Note need W(k, l) for all
  // ranks, and every rank must reach the same verdict on whether the nodes are uniform.
  const int n = me_.size;
  const int mine[4] = {cross_rank_, me_.local_rank, me_.local_size, me_.node};
  std::vector<int> all(4 * static_cast<size_t>(n));
  const int rc = MPI_Allgather(mine, 4, MPI_INT, all.data(), 4, MPI_INT, world.handle());
  ZS_CHECK(rc == MPI_SUCCESS, ErrorCode::kCommunication,
           "HierarchicalCommunicator: MPI_Allgather of the node layout failed on rank {} of {}",
           me_.rank, n);
  const int L = me_.local_size, N = me_.num_nodes;
  bool uniform = static_cast<int64_t>(N) * L == n;
  node_of_.assign(n, 0);
  for (int r = 0; r < n; ++r) {
    node_of_[r] = all[4 * r + 3];
    uniform = uniform && all[4 * r + 2] == L;
  }
  if (uniform) {
    world_of_.assign(n, -1);
    for (int r = 0; r < n; ++r) {
      const int k = all[4 * r], l = all[4 * r + 1];
      if (k < 0 || k >= N || l < 0 || l >= L || world_of_[k * L + l] != -1) {
        uniform = false;
        break;
      }
      world_of_[k * L + l] = r;
    }
  }
  if (!uniform) world_of_.clear();
  hier_possible_ = uniform && N > 1 && L > 1;
  use_hier_ = hier_possible_;
}

HierarchicalCommunicator::~HierarchicalCommunicator() {
  try {
    complete_pending();
  } catch (...) {  // a destructor cannot report
  }
}

int HierarchicalCommunicator::world_rank_of(int cross_rank, int local_rank) const {
  const int L = me_.local_size, N = me_.num_nodes;
  if (world_of_.empty() || cross_rank < 0 || cross_rank >= N || local_rank < 0 || local_rank >= L) {
    return -1;
  }
  return world_of_[static_cast<size_t>(cross_rank) * L + local_rank];
}

void HierarchicalCommunicator::set_hierarchical(bool enable) {
  complete_pending();
  use_hier_ = enable && hier_possible_;
}

void HierarchicalCommunicator::reset_counters() {
  complete_pending();
  counters_.reset();
  links_.reset();
}

std::unique_ptr<Communicator> HierarchicalCommunicator::split(int color, int key) {
  complete_pending();
  return world_.split(color, key);
}

// ---------------------------------------------------------------------------------------------
// Scratch

HierarchicalCommunicator::Sizes HierarchicalCommunicator::scratch_sizes(CollectiveKind kind,
                                                                        size_t count,
                                                                        DType dtype) const {
  Sizes s;
  if (!use_hier_) return s;
  const size_t n = static_cast<size_t>(me_.size), L = static_cast<size_t>(me_.local_size);
  const size_t e = dtype_size(dtype), a = dtype_size(acc_type(dtype));
  switch (kind) {
    case CollectiveKind::kAllGather:
      s.out = n * count * e;
      break;
    case CollectiveKind::kReduceScatter:
      s.acc = n * count * a;
      break;
    case CollectiveKind::kAllReduce: {
      const size_t p = ceil_div(count, L);
      s.acc = L * p * a;
      s.out = L * p * e;
      break;
    }
    default:
      break;
  }
  return s;
}

size_t HierarchicalCommunicator::scratch_bytes(CollectiveKind kind, size_t count,
                                               DType dtype) const {
  const Sizes s = scratch_sizes(kind, count, dtype);
  return s.acc + s.out;
}

void HierarchicalCommunicator::ensure_scratch(const Sizes& s) {
  // Free first: the peak holds one copy, not two.
  if (acc_.size() < s.acc) {
    acc_.reset();
    acc_ = Buffer(s.acc, MemCategory::kCommBuffers);
  }
  if (out_.size() < s.out) {
    out_.reset();
    out_ = Buffer(s.out, MemCategory::kCommBuffers);
  }
}

void HierarchicalCommunicator::reserve(CollectiveKind kind, size_t count, DType dtype) {
  complete_pending();
  ensure_scratch(scratch_sizes(kind, count, dtype));
}

// ---------------------------------------------------------------------------------------------
// Counters

void HierarchicalCommunicator::count_hier(CollectiveKind kind, int64_t intra, int64_t inter) {
  const int k = at(kind);
  counters_.calls[k] += 1;
  counters_.sent[k] += intra + inter;
  counters_.received[k] += intra + inter;
  links_.intra_node.calls[k] += 1;
  links_.intra_node.sent[k] += intra;
  links_.intra_node.received[k] += intra;
  links_.inter_node.calls[k] += 1;
  links_.inter_node.sent[k] += inter;
  links_.inter_node.received[k] += inter;
}

void HierarchicalCommunicator::count_flat(CollectiveKind kind, size_t count, DType dtype,
                                          int root) {
  counters_.record(kind, count, dtype, root, me_.rank, me_.size);
  const int root_node =
      (root >= 0 && root < me_.size) ? node_of_[static_cast<size_t>(root)] : me_.node;
  record_flat_links(links_, kind, count, dtype, me_, root, root_node);
}

// ---------------------------------------------------------------------------------------------
// The two-level algorithms ([Note: hierarchical collectives])

void HierarchicalCommunicator::complete_pending() {
  if (pending_ != nullptr) pending_->finish();
}

WorkHandle HierarchicalCommunicator::start_hier(CollectiveKind kind, const void* send, void* recv,
                                                size_t count, DType dt, ReduceOp op) {
  const int L = me_.local_size, N = me_.num_nodes;
  const int l = me_.local_rank, k = cross_rank_;
  const size_t e = dtype_size(dt);
  const DType acc = acc_type(dt);
  const size_t a = dtype_size(acc);
  const size_t uL = static_cast<size_t>(L), uN = static_cast<size_t>(N);
  // The node-local and cross-node steps reduce with kSum (kAvg divides once at the end) or kMax.
  const ReduceOp sub_op = op == ReduceOp::kMax ? ReduceOp::kMax : ReduceOp::kSum;
  auto w = std::make_unique<PendingWork>(this, kind, recv, count, dt, op);
  w->seq = flight_recorder().begin(kind, static_cast<uint64_t>(count) * e, dt);
  if (count == 0) {
    count_hier(kind, 0, 0);
    pending_ = w.get();
    return w;  // nothing to move; finish() has nothing to do
  }
  ensure_scratch(scratch_sizes(kind, count, dt));
  switch (kind) {
    case CollectiveKind::kAllGather: {
      // out_: [l'][k'] blocks of count elements; this rank's row l receives the cross step.
      char* row = bytes(out_.data()) + static_cast<size_t>(l) * uN * count * e;
      count_hier(kind, ring_bytes(kind, uN * count, dt, l, L), ring_bytes(kind, count, dt, k, N));
      w->mine = row;
      w->cross = cross_->start_all_gather(send, row, count, dt);
      break;
    }
    case CollectiveKind::kReduceScatter: {
      // acc_: [l'][k'] blocks = send's block of W(k', l'), widened; row l is this rank's after
      // the node-local reduce-scatter, and its block k this rank's after the cross-node one.
      char* p = bytes(acc_.data());
      for (int lp = 0; lp < L; ++lp)
        for (int kp = 0; kp < N; ++kp) {
          const size_t src = static_cast<size_t>(world_of_[static_cast<size_t>(kp) * uL + lp]);
          const size_t dst = static_cast<size_t>(lp) * uN + static_cast<size_t>(kp);
          widen(bytes(send) + src * count * e, dt, p + dst * count * a, count);
        }
      char* row = p + static_cast<size_t>(l) * uN * count * a;
      count_hier(kind, ring_bytes(kind, uN * count, acc, l, L), ring_bytes(kind, count, acc, k, N));
      local_->reduce_scatter(p, row, uN * count, acc, sub_op);
      w->mine = row + static_cast<size_t>(k) * count * a;
      w->cross = cross_->start_reduce_scatter(row, w->mine, count, acc, sub_op);
      break;
    }
    case CollectiveKind::kAllReduce: {
      // acc_: L pieces of ceil(count/L) elements, zero-padded; piece l is this rank's.
      const size_t piece = ceil_div(count, uL);
      char* p = bytes(acc_.data());
      widen(send, dt, p, count);
      std::memset(p + count * a, 0, (uL * piece - count) * a);
      w->mine = p + static_cast<size_t>(l) * piece * a;
      count_hier(kind,
                 ring_bytes(CollectiveKind::kReduceScatter, piece, acc, l, L) +
                     ring_bytes(CollectiveKind::kAllGather, piece, dt, l, L),
                 ring_bytes(kind, piece, acc, k, N));
      local_->reduce_scatter(p, w->mine, piece, acc, sub_op);
      w->cross = cross_->start_all_reduce(w->mine, w->mine, piece, acc, sub_op);
      break;
    }
    default:
      ZS_ASSERT(false);
  }
  pending_ = w.get();
  return w;
}

void HierarchicalCommunicator::finish_hier(PendingWork& w) {
  if (w.count == 0) return;
  const int L = me_.local_size, N = me_.num_nodes;
  const int l = me_.local_rank;
  const size_t e = dtype_size(w.dt);
  const size_t uL = static_cast<size_t>(L), uN = static_cast<size_t>(N);
  const size_t count = w.count;
  switch (w.kind) {
    case CollectiveKind::kAllGather: {
      char* s = bytes(out_.data());
      local_->all_gather(w.mine, s, uN * count, w.dt);  // in place: row l is this rank's block
      for (int lp = 0; lp < L; ++lp)
        for (int kp = 0; kp < N; ++kp) {
          const size_t dst = static_cast<size_t>(world_of_[static_cast<size_t>(kp) * uL + lp]);
          const size_t src = static_cast<size_t>(lp) * uN + static_cast<size_t>(kp);
          std::memcpy(bytes(w.recv) + dst * count * e, s + src * count * e, count * e);
        }
      break;
    }
    case CollectiveKind::kReduceScatter:
      finish_values(w.mine, w.dt, w.op, me_.size, w.recv, count);
      break;
    case CollectiveKind::kAllReduce: {
      const size_t piece = ceil_div(count, uL);
      char* t = bytes(out_.data());
      char* mine = t + static_cast<size_t>(l) * piece * e;
      finish_values(w.mine, w.dt, w.op, me_.size, mine, piece);
      local_->all_gather(mine, t, piece, w.dt);  // in place
      std::memcpy(w.recv, t, count * e);
      break;
    }
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Entry points

void HierarchicalCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  start_all_gather(send, recv, count, dtype)->wait();
}

void HierarchicalCommunicator::reduce_scatter(const void* send, void* recv, size_t count,
                                              DType dtype, ReduceOp op) {
  start_reduce_scatter(send, recv, count, dtype, op)->wait();
}

void HierarchicalCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                          ReduceOp op) {
  start_all_reduce(send, recv, count, dtype, op)->wait();
}

WorkHandle HierarchicalCommunicator::start_all_gather(const void* send, void* recv, size_t count,
                                                      DType dtype) {
  const auto kind = CollectiveKind::kAllGather;
  check_collective_args(kind, send, recv, count, dtype, ReduceOp::kSum, 0, me_.rank, me_.size);
  complete_pending();
  if (!use_hier_) {
    count_flat(kind, count, dtype, 0);
    return world_.start_all_gather(send, recv, count, dtype);
  }
  return start_hier(kind, send, recv, count, dtype, ReduceOp::kSum);
}

WorkHandle HierarchicalCommunicator::start_reduce_scatter(const void* send, void* recv,
                                                          size_t count, DType dtype, ReduceOp op) {
  const auto kind = CollectiveKind::kReduceScatter;
  check_collective_args(kind, send, recv, count, dtype, op, 0, me_.rank, me_.size);
  complete_pending();
  if (!use_hier_) {
    count_flat(kind, count, dtype, 0);
    return world_.start_reduce_scatter(send, recv, count, dtype, op);
  }
  return start_hier(kind, send, recv, count, dtype, op);
}

WorkHandle HierarchicalCommunicator::start_all_reduce(const void* send, void* recv, size_t count,
                                                      DType dtype, ReduceOp op) {
  const auto kind = CollectiveKind::kAllReduce;
  check_collective_args(kind, send, recv, count, dtype, op, 0, me_.rank, me_.size);
  complete_pending();
  if (!use_hier_) {
    count_flat(kind, count, dtype, 0);
    return world_.start_all_reduce(send, recv, count, dtype, op);
  }
  return start_hier(kind, send, recv, count, dtype, op);
}

void HierarchicalCommunicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  check_collective_args(CollectiveKind::kBroadcast, buf, buf, count, dtype, ReduceOp::kSum, root,
                        me_.rank, me_.size);
  complete_pending();
  count_flat(CollectiveKind::kBroadcast, count, dtype, root);
  world_.broadcast(buf, count, dtype, root);
}

void HierarchicalCommunicator::all_to_all(const void* send, void* recv, size_t count, DType dtype) {
  check_collective_args(CollectiveKind::kAllToAll, send, recv, count, dtype, ReduceOp::kSum, 0,
                        me_.rank, me_.size);
  complete_pending();
  count_flat(CollectiveKind::kAllToAll, count, dtype, 0);
  world_.all_to_all(send, recv, count, dtype);
}

WorkHandle HierarchicalCommunicator::start_all_to_all(const void* send, void* recv, size_t count,
                                                      DType dtype) {
  check_collective_args(CollectiveKind::kAllToAll, send, recv, count, dtype, ReduceOp::kSum, 0,
                        me_.rank, me_.size);
  complete_pending();
  count_flat(CollectiveKind::kAllToAll, count, dtype, 0);
  return world_.start_all_to_all(send, recv, count, dtype);
}

void HierarchicalCommunicator::barrier() {
  complete_pending();
  count_flat(CollectiveKind::kBarrier, 0, DType::kU8, 0);
  world_.barrier();
}

}  // namespace zs
