// MpiCommunicator's collectives and their asynchronous Work handles. Set-up, scratch, checks and
// the chunked MPI primitives are in mpi_communicator.cc.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "collectives/flight_recorder.h"
#include "collectives/mpi_communicator.h"
#include "collectives/reduce_kernels.h"
#include "core/error.h"

namespace zs {
namespace {

char* bytes(void* p) { return static_cast<char*>(p); }
size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Completes `reqs`; blocking when `block`, else polls. Returns whether all are complete.
bool complete(std::vector<MPI_Request>& reqs, bool block, int* rc) {
  if (reqs.empty()) return true;
  int flag = 1;
  if (block) {
    *rc = MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  } else {
    *rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE);
  }
  return flag != 0 || *rc != MPI_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Work handles

// Requests only: an all-gather's, or (kind kAllToAll) an all-to-all's.
class MpiCommunicator::AllGatherWork final : public Work {
 public:
  AllGatherWork(MpiCommunicator* c, size_t count, DType dt,
                CollectiveKind kind = CollectiveKind::kAllGather)
      : c_(c), count_(count), dt_(dt), kind_(kind) {}
  ~AllGatherWork() override {
    if (done_) return;
    try {
      wait();
    } catch (...) {  // a destructor cannot report; wait() explicitly to see errors
    }
  }
  void wait() override { poll(true); }
  bool test() override { return poll(false); }
  std::vector<MPI_Request> reqs;

 private:
  bool poll(bool block) {
    if (done_) return true;
    int rc = MPI_SUCCESS;
    if (!complete(reqs, block, &rc)) return false;
    done_ = true;
    const bool gather = kind_ == CollectiveKind::kAllGather;
    c_->check_mpi(rc, gather ? "MPI_Iallgather (wait)" : "MPI_Ialltoall (wait)", kind_, count_,
                  dt_);
    return true;
  }
  MpiCommunicator* c_;
  size_t count_;
  DType dt_;
  CollectiveKind kind_;
  bool done_ = false;
};

class MpiCommunicator::ReduceScatterWork final : public Work {
 public:
  ReduceScatterWork(MpiCommunicator* c, Slot* slot, void* recv, size_t count, DType dt, ReduceOp op)
      : c_(c), slot_(slot), recv_(recv), count_(count), dt_(dt), op_(op) {}
  ~ReduceScatterWork() override {
    if (!done_) {
      try {
        wait();
      } catch (...) {  // a destructor cannot report; wait() explicitly to see errors
      }
    }
    c_->release(slot_);
  }
  void wait() override { poll(true); }
  bool test() override { return poll(false); }
  void* scratch() { return slot_->buf.data(); }
  std::vector<MPI_Request> reqs;

 private:
  bool poll(bool block) {
    if (done_) return true;
    int rc = MPI_SUCCESS;
    if (!complete(reqs, block, &rc)) return false;
    done_ = true;
    c_->check_mpi(rc, "MPI_Ialltoall (wait)", CollectiveKind::kReduceScatter, count_, dt_);
    reduce_pieces(slot_->buf.data(), count_, c_->size_, recv_, count_, dt_, op_);
    c_->release(slot_);
    slot_ = nullptr;
    return true;
  }
  MpiCommunicator* c_;
  Slot* slot_;
  void* recv_;
  size_t count_;
  DType dt_;
  ReduceOp op_;
  bool done_ = false;
};

// Phases: kExchange (all-to-all posted) -> kGather (all-gather posted, in start order on
// phase2_comm_) -> kDone.
class MpiCommunicator::AllReduceWork final : public Work {
 public:
  enum class Phase { kExchange, kGather, kDone };
  AllReduceWork(MpiCommunicator* c, Slot* slot, void* recv, size_t count, DType dt, ReduceOp op)
      : c_(c), slot_(slot), recv_(recv), count_(count), dt_(dt), op_(op) {
    const size_t n = static_cast<size_t>(c->size_);
    const size_t elem = dtype_size(dt);
    chunk_ = ceil_div(count, n);
    padded_ = count % n != 0;
    // Scratch layout: [padded copy: n*chunk elements, when padded][exchange: n*chunk elements]
    char* base = bytes(slot->buf.data());
    exchange_ = padded_ ? base + n * chunk_ * elem : base;
    result_ = padded_ ? base : bytes(recv);
  }
  ~AllReduceWork() override {
    if (phase_ != Phase::kDone) {
      try {
        wait();
      } catch (...) {  // a destructor cannot report; wait() explicitly to see errors
      }
    }
    auto& q = c_->pending_phase2_;
    q.erase(std::remove(q.begin(), q.end(), this), q.end());
    c_->release(slot_);
  }
  void wait() override {
    if (phase_ == Phase::kDone) return;
    if (phase_ == Phase::kExchange) c_->advance_phase2(this, true);
    finish(true);
  }
  bool test() override {
    if (phase_ == Phase::kDone) return true;
    if (phase_ == Phase::kExchange) c_->advance_phase2(this, false);
    if (phase_ == Phase::kExchange) return false;
    return finish(false);
  }

  // Copies the input into the padded region when count % n != 0; returns what to exchange.
  const void* prepare(const void* send) {
    if (!padded_) return send;
    const size_t elem = dtype_size(dt_);
    const size_t total = chunk_ * static_cast<size_t>(c_->size_);
    std::memcpy(result_, send, count_ * elem);
    std::memset(result_ + count_ * elem, 0, (total - count_) * elem);
    return result_;
  }
  // Phase 1 done: reduce this rank's piece into place. Returns false while the exchange runs.
  bool retire_exchange(bool block) {
    int rc = MPI_SUCCESS;
    if (!complete(exchange_reqs, block, &rc)) return false;
    if (rc != MPI_SUCCESS) phase_ = Phase::kDone;
    c_->check_mpi(rc, "MPI_Ialltoall (wait)", CollectiveKind::kAllReduce, count_, dt_);
    reduce_pieces(exchange_, chunk_, c_->size_, piece(), chunk_, dt_, op_);
    return true;
  }
  void post_gather() {
    phase_ = Phase::kGather;
    c_->allgather_raw(piece(), result_, chunk_, dt_, &gather_reqs, CollectiveKind::kAllReduce,
                      c_->phase2_comm_);
  }

  std::vector<MPI_Request> exchange_reqs;
  std::vector<MPI_Request> gather_reqs;
  Phase phase_ = Phase::kExchange;
  const void* exchange_src = nullptr;
  char* exchange_ = nullptr;

 private:
  char* piece() { return result_ + static_cast<size_t>(c_->rank_) * chunk_ * dtype_size(dt_); }
  bool finish(bool block) {
    int rc = MPI_SUCCESS;
    if (!complete(gather_reqs, block, &rc)) return false;
    phase_ = Phase::kDone;
    c_->check_mpi(rc, "MPI_Iallgather (wait)", CollectiveKind::kAllReduce, count_, dt_);
    if (padded_) std::memcpy(recv_, result_, count_ * dtype_size(dt_));
    c_->release(slot_);
    slot_ = nullptr;
    return true;
  }
  MpiCommunicator* c_;
  Slot* slot_;
  void* recv_;
  size_t count_;
  DType dt_;
  ReduceOp op_;
  size_t chunk_ = 0;
  bool padded_ = false;
  char* result_ = nullptr;
};

// Posts second phases strictly in start order: the front of the queue first, up to `upto`.
void MpiCommunicator::advance_phase2(AllReduceWork* upto, bool block) {
  while (!pending_phase2_.empty()) {
    AllReduceWork* w = pending_phase2_.front();
    if (!retire_phase1(w, block)) return;
    pending_phase2_.pop_front();
    w->post_gather();
    if (w == upto) return;
  }
}

bool MpiCommunicator::retire_phase1(AllReduceWork* w, bool block) {
  try {
    return w->retire_exchange(block);
  } catch (...) {
    pending_phase2_.pop_front();
    throw;
  }
}

// ---------------------------------------------------------------------------------------------
// [Note: flight recorder] Every collective of a world-sized communicator is in the ring from its
// call (after the argument checks) until it returns, or until its Work completes.

MpiCommunicator::Record::~Record() {
  if (seq != 0) flight_recorder().finish(seq);
}

uint64_t MpiCommunicator::record_begin(CollectiveKind kind, size_t count, DType dtype) {
  if (!record_) return 0;
  return flight_recorder().begin(kind, static_cast<uint64_t>(count) * dtype_size(dtype), dtype);
}

class MpiCommunicator::RecordedWork final : public Work {
 public:
  RecordedWork(WorkHandle inner, uint64_t seq) : inner_(std::move(inner)), seq_(seq) {}
  ~RecordedWork() override {
    inner_.reset();  // waits for an unfinished one
    done();
  }
  void wait() override {
    inner_->wait();
    done();
  }
  bool test() override {
    const bool finished = inner_->test();
    if (finished) done();
    return finished;
  }

 private:
  void done() {
    if (seq_ != 0) flight_recorder().finish(seq_);
    seq_ = 0;
  }
  WorkHandle inner_;
  uint64_t seq_;
};

WorkHandle MpiCommunicator::recorded(WorkHandle w, uint64_t seq) {
  if (seq == 0) return w;
  return std::make_unique<RecordedWork>(std::move(w), seq);
}

// [Note: one rank] With one rank every collective is a copy of send into recv (none in place):
// a sum, average or maximum over one contribution is that contribution, bit for bit. The staged
// paths would copy twice (into scratch and out of it); a one-process run (stage 0 at one rank)
// reduces every gradient, so this is ~3% of its step at a small shape.
void MpiCommunicator::solo(const void* send, void* recv, size_t count, DType dtype) {
  if (shm_on_) shm_drain(nullptr);  // earlier window operations first, in call order
  if (send != recv && count > 0) std::memmove(recv, send, count * dtype_size(dtype));
}

// ---------------------------------------------------------------------------------------------
// Synchronous collectives

void MpiCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  validate(CollectiveKind::kAllGather, send, recv, count, dtype, ReduceOp::kSum, 0);
  Record rec{record_begin(CollectiveKind::kAllGather, count, dtype)};
  check_agreement(CollectiveKind::kAllGather, count, dtype, ReduceOp::kSum, 0);
  count_bytes(CollectiveKind::kAllGather, count, dtype, 0);
  if (size_ == 1) return solo(send, recv, count, dtype);
  allgather_raw(send, recv, count, dtype, nullptr, CollectiveKind::kAllGather, comm_);
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op) {
  const auto kind = CollectiveKind::kReduceScatter;
  validate(kind, send, recv, count, dtype, op, 0);
  Record rec{record_begin(kind, count, dtype)};
  check_agreement(kind, count, dtype, op, 0);
  count_bytes(kind, count, dtype, 0);
  if (size_ == 1) return solo(send, recv, count, dtype);
  if (shm_on_) {
    shm_drain(nullptr);  // earlier window operations first, in start order
    shm_run(kind, send, recv, count, dtype, op);
    return;
  }
  SlotGuard g{this, acquire(scratch_bytes(kind, count, dtype))};
  // Why through scratch: the all-to-all lands every rank's piece of our shard side by side, then
  // one local pass reduces them in rank order (the determinism contract).
  alltoall_raw(send, g.slot->buf.data(), count, dtype, nullptr, kind);
  reduce_pieces(g.slot->buf.data(), count, size_, recv, count, dtype, op);
}

bool MpiCommunicator::pair_sum_direct(size_t count, DType dtype, ReduceOp op) const {
  return size_ == 2 && op == ReduceOp::kSum && (dtype == DType::kF32 || dtype == DType::kF64) &&
         count * dtype_size(dtype) <= kPairDirectBytes &&
         count <= static_cast<size_t>(std::numeric_limits<int>::max());
}

void MpiCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op) {
  const auto kind = CollectiveKind::kAllReduce;
  validate(kind, send, recv, count, dtype, op, 0);
  Record rec{record_begin(kind, count, dtype)};
  check_agreement(kind, count, dtype, op, 0);
  count_bytes(kind, count, dtype, 0);
  if (size_ == 1) return solo(send, recv, count, dtype);
  if (pair_sum_direct(count, dtype, op)) {
    // [Note: two-rank sums] With two ranks, x0 + x1 is the only sum there is: IEEE addition is
    // commutative, so MPI's own all-reduce gives the rank-order bits, with fewer copies and
    // synchronisations than the staged paths for messages up to kPairDirectBytes.
    shm_drain(nullptr);  // earlier window operations first, in call order
    const bool in_place = send == recv;
    check_mpi(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, static_cast<int>(count),
                            dtype == DType::kF32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, comm_),
              "MPI_Allreduce", kind, count, dtype);
    return;
  }
  if (shm_on_) {
    shm_drain(nullptr);
    shm_run(kind, send, recv, count, dtype, op);
    return;
  }
  const size_t n = static_cast<size_t>(size_);
  const size_t elem = dtype_size(dtype);
  const size_t chunk = ceil_div(count, n);
  const bool padded = count % n != 0;
  SlotGuard g{this, acquire(scratch_bytes(kind, count, dtype))};
  char* base = bytes(g.slot->buf.data());
  // [Note: all_reduce padding] counts that do not divide by n are copied into a zero-padded
  // region of n*chunk elements, reduced and gathered there, and the first count copied out.
  char* result = padded ? base : bytes(recv);
  char* exchange = padded ? base + n * chunk * elem : base;
  const void* src = send;
  if (padded) {
    std::memcpy(result, send, count * elem);
    std::memset(result + count * elem, 0, (n * chunk - count) * elem);
    src = result;
  }
  char* piece = result + static_cast<size_t>(rank_) * chunk * elem;
  alltoall_raw(src, exchange, chunk, dtype, nullptr, kind);
  reduce_pieces(exchange, chunk, size_, piece, chunk, dtype, op);
  allgather_raw(piece, result, chunk, dtype, nullptr, kind, comm_);
  if (padded) std::memcpy(recv, result, count * elem);
}

void MpiCommunicator::bcast_raw(void* buf, size_t count, DType dtype, int root) {
  const size_t elem = dtype_size(dtype);
  MPI_Datatype t = elem == 1   ? MPI_BYTE
                   : elem == 2 ? MPI_UINT16_T
                   : elem == 4 ? MPI_UINT32_T
                               : MPI_UINT64_T;
  for (size_t off = 0; off < count || (count == 0 && off == 0); off += chunk_limit_) {
    const size_t len = std::min(chunk_limit_, count - off);
    check_mpi(MPI_Bcast(bytes(buf) + off * elem, static_cast<int>(len), t, root, comm_),
              "MPI_Bcast", CollectiveKind::kBroadcast, count, dtype);
    if (count == 0) break;
  }
}

void MpiCommunicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  validate(CollectiveKind::kBroadcast, buf, buf, count, dtype, ReduceOp::kSum, root);
  Record rec{record_begin(CollectiveKind::kBroadcast, count, dtype)};
  check_agreement(CollectiveKind::kBroadcast, count, dtype, ReduceOp::kSum, root);
  count_bytes(CollectiveKind::kBroadcast, count, dtype, root);
  bcast_raw(buf, count, dtype, root);
}

uint64_t MpiCommunicator::begin_all_to_all(const void* send, const void* recv, size_t count,
                                           DType dtype) {
  const auto kind = CollectiveKind::kAllToAll;
  validate(kind, send, recv, count, dtype, ReduceOp::kSum, 0);
  const size_t span = static_cast<size_t>(size_) * count * dtype_size(dtype);
  const char* s = static_cast<const char*>(send);
  const char* r = static_cast<const char*>(recv);
  ZS_CHECK(count == 0 || s + span <= r || r + span <= s, ErrorCode::kInvalidArgument,
           "all_to_all: send and receive buffers overlap (rank {} of {}, count {} x {})", rank_,
           size_, count, dtype_name(dtype));
  Record rec{record_begin(kind, count, dtype)};
  check_agreement(kind, count, dtype, ReduceOp::kSum, 0);
  count_bytes(kind, count, dtype, 0);
  shm_drain(nullptr);  // earlier window operations first, in call order
  return std::exchange(rec.seq, 0);
}

void MpiCommunicator::all_to_all(const void* send, void* recv, size_t count, DType dtype) {
  Record rec{begin_all_to_all(send, recv, count, dtype)};
  alltoall_raw(send, recv, count, dtype, nullptr, CollectiveKind::kAllToAll);
}

void MpiCommunicator::barrier() {
  Record rec{record_begin(CollectiveKind::kBarrier, 0, DType::kU8)};
  count_bytes(CollectiveKind::kBarrier, 0, DType::kU8, 0);
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier", CollectiveKind::kBarrier, 0, DType::kU8);
}

// ---------------------------------------------------------------------------------------------
// Asynchronous collectives

WorkHandle MpiCommunicator::start_all_gather(const void* send, void* recv, size_t count,
                                             DType dtype) {
  validate(CollectiveKind::kAllGather, send, recv, count, dtype, ReduceOp::kSum, 0);
  Record rec{record_begin(CollectiveKind::kAllGather, count, dtype)};
  check_agreement(CollectiveKind::kAllGather, count, dtype, ReduceOp::kSum, 0);
  count_bytes(CollectiveKind::kAllGather, count, dtype, 0);
  if (size_ == 1) {
    solo(send, recv, count, dtype);
    return std::make_unique<DoneWork>();  // the record ends with rec
  }
  auto w = std::make_unique<AllGatherWork>(this, count, dtype);
  allgather_raw(send, recv, count, dtype, &w->reqs, CollectiveKind::kAllGather, comm_);
  return recorded(std::move(w), std::exchange(rec.seq, 0));
}

WorkHandle MpiCommunicator::start_reduce_scatter(const void* send, void* recv, size_t count,
                                                 DType dtype, ReduceOp op) {
  const auto kind = CollectiveKind::kReduceScatter;
  validate(kind, send, recv, count, dtype, op, 0);
  Record rec{record_begin(kind, count, dtype)};
  check_agreement(kind, count, dtype, op, 0);
  count_bytes(kind, count, dtype, 0);
  if (size_ == 1) {
    solo(send, recv, count, dtype);
    return std::make_unique<DoneWork>();
  }
  if (shm_on_) {
    return recorded(shm_start(kind, send, recv, count, dtype, op), std::exchange(rec.seq, 0));
  }
  auto w = std::make_unique<ReduceScatterWork>(this, acquire(scratch_bytes(kind, count, dtype)),
                                               recv, count, dtype, op);
  alltoall_raw(send, w->scratch(), count, dtype, &w->reqs, kind);
  return recorded(std::move(w), std::exchange(rec.seq, 0));
}

WorkHandle MpiCommunicator::start_all_reduce(const void* send, void* recv, size_t count,
                                             DType dtype, ReduceOp op) {
  const auto kind = CollectiveKind::kAllReduce;
  validate(kind, send, recv, count, dtype, op, 0);
  Record rec{record_begin(kind, count, dtype)};
  check_agreement(kind, count, dtype, op, 0);
  count_bytes(kind, count, dtype, 0);
  if (size_ == 1) {
    solo(send, recv, count, dtype);
    return std::make_unique<DoneWork>();
  }
  if (shm_on_) {
    return recorded(shm_start(kind, send, recv, count, dtype, op), std::exchange(rec.seq, 0));
  }
  auto w = std::make_unique<AllReduceWork>(this, acquire(scratch_bytes(kind, count, dtype)), recv,
                                           count, dtype, op);
  const void* src = w->prepare(send);
  alltoall_raw(src, w->exchange_, ceil_div(count, static_cast<size_t>(size_)), dtype,
               &w->exchange_reqs, kind);
  pending_phase2_.push_back(w.get());
  return recorded(std::move(w), std::exchange(rec.seq, 0));
}

WorkHandle MpiCommunicator::start_all_to_all(const void* send, void* recv, size_t count,
                                             DType dtype) {
  Record rec{begin_all_to_all(send, recv, count, dtype)};
  auto w = std::make_unique<AllGatherWork>(this, count, dtype, CollectiveKind::kAllToAll);
  alltoall_raw(send, recv, count, dtype, &w->reqs, CollectiveKind::kAllToAll);
  return recorded(std::move(w), std::exchange(rec.seq, 0));
}

}  // namespace zs
