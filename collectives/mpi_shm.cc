// MpiCommunicator's shared-memory path: reduce_scatter and all_reduce over an MPI-3 shared-memory
// window when every rank of the communicator is on one node.
//
// [Note: shared-memory window]
// Layout: the window is one contiguous allocation (MPI_Win_allocate_shared's default); rank r's
// segment (after rank r-1's) holds a 64-byte counter line, then 3 slots of shm_slot_ bytes. Pass p
// of any call uses slot p % 3 (shm_pass_ counts passes since the window was allocated,
// identically on every rank). shm_sync() is a barrier over the counters (flag protocol): every
// rank publishes how many syncs it entered (release store) and waits for every counter to reach
// it (acquire loads), spinning briefly and then yielding the core.
// reduce_scatter, per pass: each rank copies its input blocks for the peers into its slot (not its
// own block); sync; rank k reduces its block with reduce_sources(), reading rank 0, 1, ..., n-1 in
// that order (its own contribution straight from `send`, the peers' from their slots): the fp32
// (fp64) accumulation and single rounding of reduce_pieces(), so the bits of the MPI path.
// all_reduce, per pass: the same with the pass split into n pieces; rank k writes its reduced
// piece into its own slot (the range its own input skipped); after the next sync every rank
// copies every reduced piece out. The copy-out of pass i, the reduction of pass i+1 and the
// copy-in of pass i+2 share one interval between syncs, so P passes take P + 1 syncs.
// Why 3 slots and no sync at the end of a call: slot p % 3 is written again by pass p + 3, whose
// copy-in happens after the writer passed the sync that follows pass p+2's copy-in; every rank
// reaches that sync only after it finished reading pass p (reduction in the interval after pass
// p's sync, copy-out in the next). The same count holds across consecutive calls.
// Passes stage at most shm_slot_limit_ bytes per rank (512 KiB by default, so a pass stays in
// cache between the copy-in, the peers' reads and the copy-out; the option shm_pass_bytes, from
// ZS_COLLECTIVES_SHM_PASS=bytes, sets it), so the window stays small whatever the message size;
// results do not depend on the pass size (reduction is per element).
//
// Where the memory comes from: MPI_Win_allocate_shared. Open MPI's osc/sm backs the window with
// one file that the node's rank 0 creates in osc_sm_backing_directory (/dev/shm on Linux) and
// every rank maps; when that file system lacks room (a container's 64 MiB /dev/shm), rank 0 fails
// while the other ranks wait for it inside Open MPI, a hang. So before each allocation
// shm_check_space() measures the free space there (statvfs), the node's ranks agree on the least
// any of them sees (one MPI_Allreduce), and too little throws on every rank, naming the bytes
// needed, the bytes free and ZS_COLLECTIVES_SHM=0. The window needs n x (64 + 3 x pass) bytes,
// 1.5 MiB per rank at the default pass (shm_backing_bytes() adds Open MPI's share).
//
// Ordering: window operations synchronise only among themselves (counters, and shm_comm_ for
// window allocation), never with MPI collectives on comm_/phase2_comm_. Asynchronous window
// operations are queued at start and run at wait()/test() (or when a later window operation,
// synchronous or not, needs the window): always in start order, on every rank alike, so the
// syncs match.
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/mpi_communicator.h"
#include "collectives/reduce_kernels.h"
#include "core/error.h"
#include "core/memory_tracker.h"

namespace zs {
namespace {

// Why 512 KiB per pass by default (Settings::collectives_shm_pass): small enough that a pass
// stays in cache (1 MiB L2 per core, 32 MiB shared L3 on the target machines) between the
// copy-in, the peers' reads and the copy-out. 256-512 KiB passes measured up to 2x faster than
// 32 MiB passes on 2 ranks.
constexpr size_t kCtrlBytes = 64;  // one cache line per rank: its barrier counter
size_t round_up(size_t a, size_t b) { return (a + b - 1) / b * b; }
size_t segment_bytes(size_t slot) { return kCtrlBytes + 3 * slot; }
size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Bytes osc/sm asks of the backing directory for n segments of `segment` bytes: their sum, one
// page, its state and post counters (a few cache lines per rank: 4 KiB + 256 B per rank bounds
// them), and the 5% margin Open MPI's shmem layer requires free before it creates the file.
size_t shm_backing_bytes(size_t n, size_t segment) {
  const size_t raw = n * segment + static_cast<size_t>(sysconf(_SC_PAGESIZE)) + 4096 + 256 * n;
  return raw + raw / 20 + 1;
}

// Where the window's file goes: Open MPI's osc_sm_backing_directory, read through MPI's tool
// interface (it reflects OMPI_MCA_* variables and parameter files); /dev/shm, the default on
// Linux and MPICH's place too, where that variable does not exist. Read once per process.
const std::string& shm_backing_dir() {
  static const std::string dir = [] {
    std::string d = "/dev/shm";
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return d;
    int index = -1, verbosity = 0, bind = 0, scope = 0, name_len = 0, desc_len = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    MPI_T_cvar_handle h = MPI_T_CVAR_HANDLE_NULL;
    int count = 0;
    if (MPI_T_cvar_get_index("osc_sm_backing_directory", &index) == MPI_SUCCESS &&
        MPI_T_cvar_get_info(index, nullptr, &name_len, &verbosity, &type, &enumtype, nullptr,
                            &desc_len, &bind, &scope) == MPI_SUCCESS &&
        type == MPI_CHAR && MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) == MPI_SUCCESS) {
      std::vector<char> buf(static_cast<size_t>(std::max(count, 0)) + 1, '\0');
      if (MPI_T_cvar_read(h, buf.data()) == MPI_SUCCESS && buf[0] != '\0') d = buf.data();
      MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return d;
  }();
  return dir;
}

}  // namespace

class MpiCommunicator::ShmWork final : public Work {
 public:
  ShmWork(MpiCommunicator* c, CollectiveKind kind, const void* send, void* recv, size_t count,
          DType dt, ReduceOp op)
      : c_(c), kind_(kind), send_(send), recv_(recv), count_(count), dt_(dt), op_(op) {}
  ~ShmWork() override {
    if (!done_) {
      try {
        wait();
      } catch (...) {  // a destructor cannot report; wait() explicitly to see errors
      }
    }
    auto& q = c_->shm_pending_;
    q.erase(std::remove(q.begin(), q.end(), this), q.end());
  }
  // Both run the queued window operations up to this one; test() therefore blocks too.
  void wait() override {
    if (!done_) c_->shm_drain(this);
  }
  bool test() override {
    wait();
    return true;
  }
  // Runs this operation; called by shm_drain in start order.
  void run() {
    done_ = true;
    c_->shm_run(kind_, send_, recv_, count_, dt_, op_);
  }

 private:
  MpiCommunicator* c_;
  CollectiveKind kind_;
  const void* send_;
  void* recv_;
  size_t count_;
  DType dt_;
  ReduceOp op_;
  bool done_ = false;
};

void MpiCommunicator::shm_init() {
  const size_t n = static_cast<size_t>(size_);
  shm_slot_limit_ = std::max(options_.shm_pass_bytes / 64 * 64, 8 * n);
  if (size_ == 1) return;  // nothing to exchange: the MPI path is a local reduction
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type", CollectiveKind::kBarrier, 0, DType::kU8);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  // Why compare sizes on every rank: the verdict must be the same everywhere, and a communicator
  // spanning nodes splits into pieces smaller than itself on every rank.
  if (node_size != size_) {
    MPI_Comm_free(&node);
    return;
  }
  shm_comm_ = node;
  MPI_Comm_set_errhandler(shm_comm_, MPI_ERRORS_RETURN);
  shm_on_ = options_.shared_memory;
}

void MpiCommunicator::shm_free() {
  if (shm_win_ != MPI_WIN_NULL) {
    // Why a barrier: a call ends without a sync, so peers may still be copying out of our slots.
    MPI_Barrier(shm_comm_);
    MPI_Win_unlock_all(shm_win_);
    MPI_Win_free(&shm_win_);
    MemoryTracker::process().freed(MemCategory::kCommBuffers,
                                   static_cast<int64_t>(segment_bytes(shm_slot_)));
    shm_win_ = MPI_WIN_NULL;
    shm_base_ = nullptr;
    shm_slot_ = 0;
  }
  if (shm_comm_ != MPI_COMM_NULL) MPI_Comm_free(&shm_comm_);
}

void MpiCommunicator::set_shared_memory(bool enable) {
  shm_drain(nullptr);
  options_.shared_memory = enable;
  shm_on_ = enable && shm_comm_ != MPI_COMM_NULL;
}

void MpiCommunicator::set_shm_pass_limit(size_t nbytes) {
  const size_t floor = 8 * static_cast<size_t>(size_);
  ZS_CHECK(nbytes >= floor, ErrorCode::kInvalidArgument,
           "set_shm_pass_limit: {} bytes is below 8 x {} ranks", nbytes, size_);
  shm_drain(nullptr);
  shm_slot_limit_ = nbytes / 8 * 8;
}

// Collective over shm_comm_; every rank asks for the same size (it depends only on the call's
// count and dtype, which agree), so every rank grows or keeps the window alike.
void MpiCommunicator::shm_reserve(size_t slot_bytes) {
  if (shm_slot_ >= slot_bytes) return;
  const size_t slot = round_up(slot_bytes, 64);
  const CollectiveKind k = CollectiveKind::kAllReduce;
  if (shm_win_ != MPI_WIN_NULL) {
    // Why a barrier first: peers may still read the old window (no barrier ends a pass).
    check_mpi(MPI_Barrier(shm_comm_), "MPI_Barrier (window)", k, 0, DType::kU8);
    MPI_Win_unlock_all(shm_win_);
    MPI_Win_free(&shm_win_);
    MemoryTracker::process().freed(MemCategory::kCommBuffers,
                                   static_cast<int64_t>(segment_bytes(shm_slot_)));
    shm_win_ = MPI_WIN_NULL;
    shm_base_ = nullptr;
    shm_slot_ = 0;
  }
  shm_check_space(segment_bytes(slot));
  void* mine = nullptr;
  check_mpi(MPI_Win_allocate_shared(static_cast<MPI_Aint>(segment_bytes(slot)), 1, MPI_INFO_NULL,
                                    shm_comm_, &mine, &shm_win_),
            "MPI_Win_allocate_shared", k, slot, DType::kU8);
  MemoryTracker::process().allocated(MemCategory::kCommBuffers,
                                     static_cast<int64_t>(segment_bytes(slot)));
  shm_slot_ = slot;
  MPI_Aint size0 = 0;
  int disp = 0;
  void* base0 = nullptr;
  check_mpi(MPI_Win_shared_query(shm_win_, 0, &size0, &disp, &base0), "MPI_Win_shared_query", k,
            slot, DType::kU8);
  shm_base_ = static_cast<char*>(base0);
  ZS_CHECK(static_cast<char*>(mine) == shm_ctrl(rank_), ErrorCode::kCommunication,
           "shared-memory window is not contiguous on rank {} of {}", rank_, size_);
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm_win_), "MPI_Win_lock_all", k, slot, DType::kU8);
  std::atomic_ref<uint64_t>(*shm_counter(rank_)).store(0, std::memory_order_relaxed);
  MPI_Win_sync(shm_win_);
  // Why a barrier: no rank may bump its counter before every rank has zeroed its own.
  check_mpi(MPI_Barrier(shm_comm_), "MPI_Barrier (window)", k, 0, DType::kU8);
  shm_pass_ = 0;
  shm_epoch_ = 0;
}

// Collective over shm_comm_: every rank reaches the same verdict from the least free space any of
// them measured (they share the directory; a rank that cannot measure it does not count).
void MpiCommunicator::shm_check_space(size_t segment) {
  const std::string& dir = shm_backing_dir();
  const size_t need = shm_backing_bytes(static_cast<size_t>(size_), segment);
  struct statvfs fs = {};
  uint64_t free_bytes = statvfs(dir.c_str(), &fs) == 0 ? static_cast<uint64_t>(fs.f_bavail) *
                                                             static_cast<uint64_t>(fs.f_frsize)
                                                       : UINT64_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_UINT64_T, MPI_MIN, shm_comm_),
            "MPI_Allreduce (window space)", CollectiveKind::kAllReduce, 0, DType::kU8);
  ZS_CHECK(free_bytes >= need, ErrorCode::kOutOfMemory,
           "shared-memory collectives on rank {} of {}: the window needs {} bytes on {} ({} ranks "
           "x {} B and Open MPI's share), and only {} bytes are free there; make room on {}, or "
           "run with ZS_COLLECTIVES_SHM=0 (MPI's algorithms, the same results)",
           rank_, size_, need, dir, size_, segment, free_bytes, dir);
}

size_t MpiCommunicator::shm_allocated() const {
  return shm_win_ == MPI_WIN_NULL ? 0 : segment_bytes(shm_slot_);
}

char* MpiCommunicator::shm_ctrl(int rank) {
  return shm_base_ + static_cast<size_t>(rank) * segment_bytes(shm_slot_);
}

uint64_t* MpiCommunicator::shm_counter(int rank) {
  return reinterpret_cast<uint64_t*>(shm_ctrl(rank));
}

char* MpiCommunicator::shm_slot(int rank, int buffer) {
  return shm_ctrl(rank) + kCtrlBytes + static_cast<size_t>(buffer) * shm_slot_;
}

// A barrier over the window's counters: every rank publishes the number of syncs it has entered
// (release) and waits until every counter has reached it (acquire), so every write to the window
// before the sync is visible to every read after it. It spins briefly, then yields the core on
// each check: with more ranks than cores (or two ranks on one core) the peer must get to run.
void MpiCommunicator::shm_sync() {
  const uint64_t epoch = ++shm_epoch_;
  std::atomic_ref<uint64_t>(*shm_counter(rank_)).store(epoch, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    std::atomic_ref<uint64_t> peer(*shm_counter(r));
    for (int spin = 0; peer.load(std::memory_order_acquire) < epoch; ++spin) {
      if (spin < 256) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();
      }
    }
  }
}

void MpiCommunicator::shm_run(CollectiveKind kind, const void* send, void* recv, size_t count,
                              DType dtype, ReduceOp op) {
  if (count == 0) return;
  const size_t n = static_cast<size_t>(size_);
  const size_t elem = dtype_size(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  // Bytes one rank stages for the whole call; passes split it under shm_slot_limit_.
  const size_t need = kind == CollectiveKind::kReduceScatter ? n * count * elem : count * elem;
  shm_reserve(std::min(need, shm_slot_limit_));
  const size_t cap = std::min(shm_slot_, shm_slot_limit_) / elem;  // elements per slot and pass
  shm_srcs_.resize(n);
  if (kind == CollectiveKind::kReduceScatter) {
    shm_reduce_scatter(in, out, count, cap, dtype, op);
  } else {
    shm_all_reduce(in, out, count, cap, dtype, op);
  }
}

void MpiCommunicator::shm_reduce_scatter(const char* in, char* out, size_t count, size_t cap,
                                         DType dtype, ReduceOp op) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const size_t elem = dtype_size(dtype);
  std::vector<const void*>& srcs = shm_srcs_;
  const size_t step = cap / n;  // >= 1: the limit is at least 8 * n bytes
  for (size_t off = 0; off < count; off += step) {
    const size_t len = std::min(step, count - off);
    const int b = static_cast<int>(shm_pass_++ % 3);
    char* slot = shm_slot(rank_, b);
    // Our own block is read from `send` directly: only the peers' blocks go through the slot.
    for (size_t j = 0; j < n; ++j) {
      if (j == me) continue;
      std::memcpy(slot + j * len * elem, in + (j * count + off) * elem, len * elem);
    }
    shm_sync();
    for (size_t r = 0; r < n; ++r) {
      srcs[r] = r == me ? in + (me * count + off) * elem
                        : shm_slot(static_cast<int>(r), b) + me * len * elem;
    }
    reduce_sources(srcs.data(), size_, out + off * elem, len, dtype, op);
  }
}

void MpiCommunicator::shm_all_reduce(const char* in, char* out, size_t count, size_t cap,
                                     DType dtype, ReduceOp op) {
  const size_t n = static_cast<size_t>(size_);
  const size_t me = static_cast<size_t>(rank_);
  const size_t elem = dtype_size(dtype);
  std::vector<const void*>& srcs = shm_srcs_;
  // all_reduce: pass i's copy-out, pass i+1's reduction and pass i+2's copy-in share one
  // interval between barriers (three buffers make that safe), so P passes need P + 1 barriers.
  const size_t passes = ceil_div(count, cap);
  const uint64_t first_pass = shm_pass_;
  shm_pass_ += passes;
  auto buf = [&](size_t i) { return static_cast<int>((first_pass + i) % 3); };
  auto pass_len = [&](size_t i) { return std::min(cap, count - i * cap); };
  auto piece_of = [&](size_t i, size_t r, size_t* first, size_t* len) {
    const size_t l = pass_len(i), q = ceil_div(l, n);
    *first = std::min(r * q, l);
    *len = std::min(q, l - *first);
  };
  // Stages the peers' pieces only: our own piece is reduced straight from `send`, and its slot
  // range then receives the reduced piece.
  auto copy_in = [&](size_t i) {
    size_t f = 0, m = 0;
    piece_of(i, me, &f, &m);
    char* slot = shm_slot(rank_, buf(i));
    const char* src = in + i * cap * elem;
    std::memcpy(slot, src, f * elem);
    const size_t rest = f + m;
    std::memcpy(slot + rest * elem, src + rest * elem, (pass_len(i) - rest) * elem);
  };
  auto copy_out = [&](size_t i) {
    for (size_t r = 0; r < n; ++r) {
      size_t f = 0, m = 0;
      piece_of(i, r, &f, &m);
      if (m > 0) {
        std::memcpy(out + (i * cap + f) * elem, shm_slot(static_cast<int>(r), buf(i)) + f * elem,
                    m * elem);
      }
    }
  };
  copy_in(0);
  for (size_t i = 0; i < passes; ++i) {
    shm_sync();
    if (i > 0) copy_out(i - 1);
    size_t f = 0, m = 0;
    piece_of(i, me, &f, &m);
    for (size_t r = 0; r < n; ++r) {
      srcs[r] =
          r == me ? in + (i * cap + f) * elem : shm_slot(static_cast<int>(r), buf(i)) + f * elem;
    }
    reduce_sources(srcs.data(), size_, shm_slot(rank_, buf(i)) + f * elem, m, dtype, op);
    if (i + 1 < passes) copy_in(i + 1);
  }
  shm_sync();
  copy_out(passes - 1);
}

void MpiCommunicator::shm_drain(ShmWork* upto) {
  while (!shm_pending_.empty()) {
    ShmWork* w = shm_pending_.front();
    shm_pending_.pop_front();
    w->run();
    if (w == upto) return;
  }
}

WorkHandle MpiCommunicator::shm_start(CollectiveKind kind, const void* send, void* recv,
                                      size_t count, DType dtype, ReduceOp op) {
  auto w = std::make_unique<ShmWork>(this, kind, send, recv, count, dtype, op);
  shm_pending_.push_back(w.get());
  return w;
}

}  // namespace zs
