#include "collectives/nccl_communicator.h"

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/settings.h"

namespace zs {

namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI8:
      return ncclInt8;
    case DType::kU8:
      return ncclUint8;
    case DType::kF64:
      return ncclFloat64;
  }
  fail(ErrorCode::kInvalidArgument, "nccl: unknown dtype {}", static_cast<int>(dt));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  fail(ErrorCode::kInvalidArgument, "nccl: invalid reduce op {}", static_cast<int>(op));
}

void check_cuda(cudaError_t err, const char* what, int rank) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  fail(ErrorCode::kCommunication, "nccl communicator (rank {}): {} failed: {} ({})", rank, what,
       cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

// One CUDA event of the pool. `recorded` says whether cudaEventRecord ran since it was handed out
// (a wait on a never-recorded event would silently wait for nothing).
struct NcclCommunicator::Event {
  cudaEvent_t ev = nullptr;
  bool recorded = false;
  Event() { cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); }
  ~Event() {
    if (ev != nullptr) cudaEventDestroy(ev);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct NcclCommunicator::Group {
  std::shared_ptr<Event> done;
  bool compute_waits_at_end = false;  // a synchronous call was made inside the group
};

// ---------------------------------------------------------------------------------------------
// Work

class NcclCommunicator::NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* c, std::shared_ptr<Event> done) : c_(c), done_(std::move(done)) {}
  ~NcclWork() override {
    // Destroying an unfinished Work waits for it (stream-ordered, as wait()). Inside an open
    // group its event is recorded only at group_end(): the compute stream waits there instead.
    // A destructor cannot report: after a CUDA error the wait is dropped rather than terminating.
    try {
      if (done_ != nullptr && done_->recorded) {
        c_->compute_waits(*done_);
      } else if (done_ != nullptr && c_->group_ != nullptr && done_ == c_->group_->done) {
        c_->group_->compute_waits_at_end = true;
      }
    } catch (...) {
    }
  }
  void wait() override {
    ZS_CHECK(done_ != nullptr, ErrorCode::kInvalidArgument,
             "nccl Work::wait() called twice (rank {})", c_->rank());
    ZS_CHECK(done_->recorded, ErrorCode::kInvalidArgument,
             "nccl Work::wait() inside an open group: call group_end() first (rank {})",
             c_->rank());
    // Why no host sync: the compute stream waits for the comm stream's event; kernels enqueued
    // after this see the result, and the host is free to keep enqueueing.
    c_->compute_waits(*done_);
    done_.reset();
    c_->check_async_error();
  }
  bool test() override {
    if (done_ == nullptr) return true;
    if (!done_->recorded) return false;
    const cudaError_t err = cudaEventQuery(done_->ev);
    if (err == cudaErrorNotReady) {
      cudaGetLastError();
      c_->check_async_error();
      return false;
    }
    check_cuda(err, "cudaEventQuery", c_->rank());
    return true;
  }

 private:
  NcclCommunicator* c_;
  std::shared_ptr<Event> done_;
};

// ---------------------------------------------------------------------------------------------
// Construction

std::pair<int, int> find_shared_device(std::span<const DeviceUuid> uuid_by_rank) {
  for (size_t j = 1; j < uuid_by_rank.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (uuid_by_rank[i] == uuid_by_rank[j]) return {static_cast<int>(i), static_cast<int>(j)};
    }
  }
  return {-1, -1};
}

namespace {

std::string uuid_text(const DeviceUuid& u) {
  std::string s = "GPU-";
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", u[i]);
  }
  return s;
}

// [Note: one GPU per rank] The check select_local_device() leaves to whoever sees every rank:
// all ranks gather the same table and so throw, or not, together (no rank is left waiting).
void refuse_shared_devices(MPI_Comm comm, int rank, int size, int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", rank);
  DeviceUuid mine{};
  std::memcpy(mine.data(), prop.uuid.bytes, mine.size());
  std::vector<DeviceUuid> all(static_cast<size_t>(size));
  const int rc = MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                               static_cast<int>(mine.size()), MPI_BYTE, comm);
  ZS_CHECK(rc == MPI_SUCCESS, ErrorCode::kCommunication,
           "nccl communicator: MPI_Allgather of the device UUIDs failed on rank {} of {}", rank,
           size);
  const auto [a, b] = find_shared_device(all);
  const std::string visible =
      LaunchEnvironment::from_environment().cuda_visible_devices.value_or("(unset)");
  ZS_CHECK(
      a < 0, ErrorCode::kUnsupported,
      "ranks {} and {} are both on GPU {} (this is rank {}, cuda:{}, CUDA_VISIBLE_DEVICES={}): "
      "two ranks on one GPU are not supported; launch one rank per GPU",
      a, b, uuid_text(all[static_cast<size_t>(a < 0 ? 0 : a)]), rank, device, visible);
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, cudaStream_t compute) : compute_(compute) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  check_cuda(cudaGetDevice(&device_), "cudaGetDevice", rank_);
  refuse_shared_devices(comm, rank_, size_, device_);
  // Rank 0 broadcasts whether it got an id with the id: on failure every rank throws instead of
  // the others waiting in MPI_Bcast for an id that never comes.
  struct {
    ncclUniqueId id;
    int ok;
  } msg{};
  ncclResult_t id_rc = ncclSuccess;
  if (rank_ == 0) {
    id_rc = ncclGetUniqueId(&msg.id);
    msg.ok = id_rc == ncclSuccess ? 1 : 0;
  }
  const int rc = MPI_Bcast(&msg, sizeof(msg), MPI_BYTE, 0, comm);
  ZS_CHECK(rc == MPI_SUCCESS, ErrorCode::kCommunication,
           "nccl communicator: MPI_Bcast of the unique id failed on rank {} of {}", rank_, size_);
  check_nccl(id_rc, "ncclGetUniqueId", CollectiveKind::kBarrier, 0, DType::kU8);
  ZS_CHECK(msg.ok == 1, ErrorCode::kCommunication,
           "nccl communicator: rank 0 could not create the NCCL unique id (rank {} of {})", rank_,
           size_);
  // Blocking: every call returns once NCCL has enqueued its work, which the event ordering of
  // [Note: NCCL streams and events] relies on (NCCL_COMM_BLOCKING=0 is refused in check_nccl).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  check_nccl(ncclCommInitRankConfig(&comm_, size_, msg.id, rank_, &config),
             "ncclCommInitRankConfig", CollectiveKind::kBarrier, 0, DType::kU8);
  try {
    init_streams();
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, cudaStream_t compute)
    : comm_(comm), device_(device), compute_(compute) {
  try {  // this object owns `comm` from here: a failure destroys it
    check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", CollectiveKind::kBarrier, 0,
               DType::kU8);
    check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount", CollectiveKind::kBarrier, 0,
               DType::kU8);
    init_streams();
  } catch (...) {
    release();
    throw;
  }
}

void NcclCommunicator::init_streams() {
  // Non-blocking: the comm stream must not serialize with the legacy default stream, or a
  // compute stream that is the default stream would wait for every collective.
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange(&lo, &hi);
  check_cuda(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, hi),
             "cudaStreamCreateWithPriority", rank_);
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, sizeof(float)), "cudaMalloc (barrier scratch)", rank_);
  barrier_scratch_ = static_cast<float*>(p);
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() noexcept {
  if (comm_stream_ != nullptr) cudaStreamSynchronize(comm_stream_);
  events_.clear();
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  comm_ = nullptr;
  barrier_scratch_ = nullptr;
  comm_stream_ = nullptr;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::world(cudaStream_t compute) {
  return std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, compute);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  ZS_CHECK(group_ == nullptr, ErrorCode::kInvalidArgument,
           "nccl split inside an open group (rank {})", rank_);
  ncclComm_t sub = nullptr;
  check_nccl(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr),
             "ncclCommSplit", CollectiveKind::kBarrier, 0, DType::kU8);
  if (sub == nullptr) return nullptr;
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub, device_, compute_));
}

// ---------------------------------------------------------------------------------------------
// Checks and accounting (the same rules and messages as MpiCommunicator)

void NcclCommunicator::check_nccl(ncclResult_t rc, const char* call, CollectiveKind op,
                                  size_t count, DType dtype) const {
  if (rc == ncclSuccess) return;
  ZS_CHECK(rc != ncclInProgress, ErrorCode::kUnsupported,
           "{}: {} returned ncclInProgress on rank {} of {}: non-blocking NCCL communicators "
           "(NCCL_COMM_BLOCKING=0) are not supported; unset it",
           collective_kind_name(op), call, rank_, size_);
  const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
  fail(ErrorCode::kCommunication,
       "{}: {} failed on rank {} of {} (cuda:{}, count {} x {}, {} bytes): {}{}{}",
       collective_kind_name(op), call, rank_, size_, device_, count, dtype_name(dtype),
       count * dtype_size(dtype), ncclGetErrorString(rc), last && *last ? ": " : "",
       last ? last : "");
}

void NcclCommunicator::check_async_error() const {
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm_, &async);
  check_nccl(async, "asynchronous NCCL error", CollectiveKind::kBarrier, 0, DType::kU8);
}

void NcclCommunicator::validate(CollectiveKind kind, const void* send, const void* recv,
                                size_t count, DType dtype, ReduceOp op, int root) const {
  check_collective_args(kind, send, recv, count, dtype, op, root, rank_, size_);
}

void NcclCommunicator::count_bytes(CollectiveKind kind, size_t count, DType dtype, int root) {
  counters_.record(kind, count, dtype, root, rank_, size_);
}

// ---------------------------------------------------------------------------------------------
// [Note: NCCL streams and events]

std::shared_ptr<NcclCommunicator::Event> NcclCommunicator::acquire_event() {
  for (auto& e : events_) {
    if (e.use_count() == 1) {
      e->recorded = false;
      return e;
    }
  }
  events_.push_back(std::make_shared<Event>());
  ZS_CHECK(events_.back()->ev != nullptr, ErrorCode::kCommunication,
           "nccl communicator: cudaEventCreate failed (rank {})", rank_);
  return events_.back();
}

void NcclCommunicator::compute_waits(const Event& done) {
  // Stream-ordered: later compute kernels wait for the collective; the host does not.
  check_cuda(cudaStreamWaitEvent(compute_, done.ev, 0), "cudaStreamWaitEvent (compute <- comm)",
             rank_);
}

template <typename F>
std::shared_ptr<NcclCommunicator::Event> NcclCommunicator::enqueue(CollectiveKind kind,
                                                                   size_t count, DType dtype,
                                                                   F&& issue) {
  if (group_ != nullptr) {  // events are recorded once for the whole group
    if (count > 0) check_nccl(issue(), "nccl collective (in group)", kind, count, dtype);
    return group_->done;
  }
  // Why an event and not a sync: NCCL must read the inputs only after the compute kernels that
  // wrote them; the comm stream waits for the compute stream's point, on the device.
  std::shared_ptr<Event> ready = acquire_event();
  check_cuda(cudaEventRecord(ready->ev, compute_), "cudaEventRecord (compute)", rank_);
  ready->recorded = true;
  check_cuda(cudaStreamWaitEvent(comm_stream_, ready->ev, 0), "cudaStreamWaitEvent (comm)", rank_);
  if (count > 0) check_nccl(issue(), "nccl collective", kind, count, dtype);
  std::shared_ptr<Event> done = acquire_event();
  check_cuda(cudaEventRecord(done->ev, comm_stream_), "cudaEventRecord (comm)", rank_);
  done->recorded = true;
  return done;
}

void NcclCommunicator::group_start() {
  ZS_CHECK(group_ == nullptr, ErrorCode::kInvalidArgument,
           "nccl group_start: a group is already open (rank {})", rank_);
  auto g = std::make_unique<Group>();
  std::shared_ptr<Event> ready = acquire_event();
  check_cuda(cudaEventRecord(ready->ev, compute_), "cudaEventRecord (compute)", rank_);
  ready->recorded = true;
  check_cuda(cudaStreamWaitEvent(comm_stream_, ready->ev, 0), "cudaStreamWaitEvent (comm)", rank_);
  g->done = acquire_event();
  check_nccl(ncclGroupStart(), "ncclGroupStart", CollectiveKind::kBarrier, 0, DType::kU8);
  group_ = std::move(g);
}

void NcclCommunicator::group_end() {
  ZS_CHECK(group_ != nullptr, ErrorCode::kInvalidArgument,
           "nccl group_end without group_start (rank {})", rank_);
  std::unique_ptr<Group> g = std::move(group_);
  check_nccl(ncclGroupEnd(), "ncclGroupEnd", CollectiveKind::kBarrier, 0, DType::kU8);
  check_cuda(cudaEventRecord(g->done->ev, comm_stream_), "cudaEventRecord (comm, group)", rank_);
  g->done->recorded = true;
  if (g->compute_waits_at_end) compute_waits(*g->done);
}

// ---------------------------------------------------------------------------------------------
// Collectives: fill the request, check once, enqueue.

WorkHandle NcclCommunicator::start_all_gather(const void* send, void* recv, size_t count,
                                              DType dtype) {
  validate(CollectiveKind::kAllGather, send, recv, count, dtype, ReduceOp::kSum, 0);
  count_bytes(CollectiveKind::kAllGather, count, dtype, 0);
  auto done = enqueue(CollectiveKind::kAllGather, count, dtype, [&] {
    return ncclAllGather(send, recv, count, nccl_type(dtype), comm_, comm_stream_);
  });
  return std::make_unique<NcclWork>(this, std::move(done));
}

WorkHandle NcclCommunicator::start_reduce_scatter(const void* send, void* recv, size_t count,
                                                  DType dtype, ReduceOp op) {
  validate(CollectiveKind::kReduceScatter, send, recv, count, dtype, op, 0);
  count_bytes(CollectiveKind::kReduceScatter, count, dtype, 0);
  auto done = enqueue(CollectiveKind::kReduceScatter, count, dtype, [&] {
    return ncclReduceScatter(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, comm_stream_);
  });
  return std::make_unique<NcclWork>(this, std::move(done));
}

WorkHandle NcclCommunicator::start_all_reduce(const void* send, void* recv, size_t count,
                                              DType dtype, ReduceOp op) {
  validate(CollectiveKind::kAllReduce, send, recv, count, dtype, op, 0);
  count_bytes(CollectiveKind::kAllReduce, count, dtype, 0);
  auto done = enqueue(CollectiveKind::kAllReduce, count, dtype, [&] {
    return ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, comm_stream_);
  });
  return std::make_unique<NcclWork>(this, std::move(done));
}

WorkHandle NcclCommunicator::start_all_to_all(const void* send, void* recv, size_t count,
                                              DType dtype) {
  validate(CollectiveKind::kAllToAll, send, recv, count, dtype, ReduceOp::kSum, 0);
  count_bytes(CollectiveKind::kAllToAll, count, dtype, 0);
  const size_t piece = count * dtype_size(dtype);
  auto done = enqueue(CollectiveKind::kAllToAll, count, dtype, [&] {
    // Why a nested group: NCCL fuses the point-to-point pairs into one operation.
    ncclResult_t rc = ncclGroupStart();
    for (int r = 0; r < size_ && rc == ncclSuccess; ++r) {
      const size_t off = static_cast<size_t>(r) * piece;
      rc = ncclSend(static_cast<const char*>(send) + off, count, nccl_type(dtype), r, comm_,
                    comm_stream_);
      if (rc == ncclSuccess) {
        rc = ncclRecv(static_cast<char*>(recv) + off, count, nccl_type(dtype), r, comm_,
                      comm_stream_);
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    return rc != ncclSuccess ? rc : end;
  });
  return std::make_unique<NcclWork>(this, std::move(done));
}

// A synchronous call = start + wait; inside a group the compute stream's wait moves to group_end
// (the group's event is recorded there; the Work's destructor skips an unrecorded event).
void NcclCommunicator::finish_sync(Work& w) {
  if (group_ != nullptr) {
    group_->compute_waits_at_end = true;
  } else {
    w.wait();
  }
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  finish_sync(*start_all_gather(send, recv, count, dtype));
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                      ReduceOp op) {
  finish_sync(*start_reduce_scatter(send, recv, count, dtype, op));
}

void NcclCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                  ReduceOp op) {
  finish_sync(*start_all_reduce(send, recv, count, dtype, op));
}

void NcclCommunicator::all_to_all(const void* send, void* recv, size_t count, DType dtype) {
  finish_sync(*start_all_to_all(send, recv, count, dtype));
}

void NcclCommunicator::broadcast(void* buf, size_t count, DType dtype, int root) {
  validate(CollectiveKind::kBroadcast, buf, buf, count, dtype, ReduceOp::kSum, root);
  count_bytes(CollectiveKind::kBroadcast, count, dtype, root);
  auto done = enqueue(CollectiveKind::kBroadcast, count, dtype, [&] {
    return ncclBroadcast(buf, buf, count, nccl_type(dtype), root, comm_, comm_stream_);
  });
  if (group_) {
    group_->compute_waits_at_end = true;
  } else {
    compute_waits(*done);
  }
}

void NcclCommunicator::barrier() {
  ZS_CHECK(group_ == nullptr, ErrorCode::kInvalidArgument,
           "nccl barrier inside an open group (rank {})", rank_);
  counters_.calls[static_cast<int>(CollectiveKind::kBarrier)] += 1;
  auto done = enqueue(CollectiveKind::kBarrier, 1, DType::kF32, [&] {
    return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_,
                         comm_stream_);
  });
  // Why a host sync: a barrier is a host-level rendezvous (set-up, tests), never in a step.
  check_cuda(cudaEventSynchronize(done->ev), "cudaEventSynchronize (barrier)", rank_);
  check_async_error();
}

}  // namespace zs
