#include "collectives/mpi_communicator.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "collectives/flight_recorder.h"
#include "collectives/mpi_agreement.h"
#include "collectives/reduce_kernels.h"
#include "core/error.h"

namespace zs {
namespace {

// Datatype that moves elements of `elem` bytes; data is only moved, never reduced, by MPI.
MPI_Datatype base_type(size_t elem) {
  switch (elem) {
    case 1:
      return MPI_BYTE;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    default:
      return MPI_UINT64_T;
  }
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

char* bytes(void* p) { return static_cast<char*>(p); }
const char* bytes(const void* p) { return static_cast<const char*>(p); }

// One chunk's datatypes: `piece` = len contiguous elements; `strided` = the same, with the extent
// of a whole per-rank block (count elements), so rank r's chunk lands at r * count elements.
struct ChunkTypes {
  MPI_Datatype piece = MPI_DATATYPE_NULL;
  MPI_Datatype strided = MPI_DATATYPE_NULL;
  ChunkTypes(size_t len, size_t count, size_t elem) {
    MPI_Type_contiguous(static_cast<int>(len), base_type(elem), &piece);
    MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(count * elem), &strided);
    MPI_Type_commit(&piece);
    MPI_Type_commit(&strided);
  }
  // Freeing right after posting is allowed: pending operations complete normally (MPI 3.1 4.1.9).
  ~ChunkTypes() {
    MPI_Type_free(&strided);
    MPI_Type_free(&piece);
  }
  ChunkTypes(const ChunkTypes&) = delete;
  ChunkTypes& operator=(const ChunkTypes&) = delete;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction

MpiCommunicatorOptions MpiCommunicatorOptions::from_settings(const Settings& s) {
  MpiCommunicatorOptions o;
  o.shared_memory = s.collectives_shm;
  o.shm_pass_bytes = s.collectives_shm_pass;
  o.check_collectives = s.check_collectives;
  o.watchdog_timeout_s = s.watchdog_s.value_or(0.0);
  return o;
}

MpiCommunicatorOptions MpiCommunicatorOptions::from_environment() {
  return from_settings(Settings::from_environment());
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm)
    : MpiCommunicator(comm, MpiCommunicatorOptions::from_environment()) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiCommunicatorOptions& options)
    : options_(options) {
  int rc = MPI_Comm_dup(comm, &comm_);
  if (rc != MPI_SUCCESS) fail(ErrorCode::kCommunication, "MpiCommunicator: MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  // Why first ([Note: environment agreement] in collectives/mpi_agreement.h): a rank with another
  // protocol (the window or MPI's algorithms, extra checking all-reduces, another pass size) would
  // hang in its first reduction.
  try {
    const Setting protocol[] = {
        {"shared_memory (ZS_COLLECTIVES_SHM)", options_.shared_memory ? "1" : "0"},
        {"shm_pass_bytes (ZS_COLLECTIVES_SHM_PASS)", std::to_string(options_.shm_pass_bytes)},
        {"check_collectives (ZS_CHECK_COLLECTIVES)", options_.check_collectives ? "1" : "0"}};
    zs::check_agreement(comm_, protocol, "MpiCommunicator");
  } catch (...) {
    MPI_Comm_free(&comm_);  // the destructor does not run for a throwing constructor
    throw;
  }
  MPI_Comm_dup(comm_, &phase2_comm_);
  MPI_Comm_set_errhandler(phase2_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  record_ = size_ == world_size;
  // Never re-arms: the first setter wins, the program's start_watchdog() always.
  if (record_) start_watchdog_if_unset(options_.watchdog_timeout_s, world_rank, world_size);
  shm_init();
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  shm_free();
  if (phase2_comm_ != MPI_COMM_NULL) MPI_Comm_free(&phase2_comm_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(const MpiCommunicatorOptions& options) {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split",
            CollectiveKind::kBarrier, 0, DType::kU8);
  if (sub == MPI_COMM_NULL) return nullptr;
  // The parent's options: the shared path is on only where the child is one node.
  auto c = std::make_unique<MpiCommunicator>(sub, options_);
  MPI_Comm_free(&sub);
  c->chunk_limit_ = chunk_limit_;
  return c;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_shared() {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &sub),
            "MPI_Comm_split_type", CollectiveKind::kBarrier, 0, DType::kU8);
  auto c = std::make_unique<MpiCommunicator>(sub, options_);
  MPI_Comm_free(&sub);
  c->chunk_limit_ = chunk_limit_;
  return c;
}

void MpiCommunicator::set_chunk_limit(size_t elements) {
  ZS_CHECK(elements >= 1 && elements <= static_cast<size_t>(INT32_MAX), ErrorCode::kInvalidArgument,
           "set_chunk_limit: {} elements is outside [1, 2^31-1]", elements);
  chunk_limit_ = elements;
}

// ---------------------------------------------------------------------------------------------
// [Note: scratch pool]

MpiCommunicator::Slot* MpiCommunicator::acquire(size_t nbytes) {
  Slot* fit = nullptr;      // smallest free slot that holds nbytes
  Slot* largest = nullptr;  // largest free slot, grown when none fits
  for (auto& s : slots_) {
    if (s->in_use) continue;
    if (s->buf.size() >= nbytes && (fit == nullptr || s->buf.size() < fit->buf.size())) {
      fit = s.get();
    }
    if (largest == nullptr || s->buf.size() > largest->buf.size()) largest = s.get();
  }
  if (fit == nullptr) {
    if (largest == nullptr) {
      slots_.push_back(std::make_unique<Slot>());
      largest = slots_.back().get();
    }
    largest->buf.reset();  // free first: the peak holds one copy, not two
    largest->buf = Buffer(nbytes, MemCategory::kCommBuffers);
    fit = largest;
  }
  fit->in_use = true;
  return fit;
}

void MpiCommunicator::release(Slot* slot) {
  if (slot != nullptr) slot->in_use = false;
}

void MpiCommunicator::reserve(size_t nbytes, int slots) {
  ZS_CHECK(slots >= 0, ErrorCode::kInvalidArgument, "reserve: negative slot count {}", slots);
  std::vector<Slot*> held;
  for (int i = 0; i < slots; ++i) held.push_back(acquire(nbytes));
  for (Slot* s : held) release(s);
}

size_t MpiCommunicator::scratch_bytes(CollectiveKind kind, size_t count, DType dtype) const {
  const size_t n = static_cast<size_t>(size_);
  const size_t elem = dtype_size(dtype);
  if (kind == CollectiveKind::kReduceScatter) return n * count * elem;
  if (kind == CollectiveKind::kAllReduce) {
    const size_t chunk = ceil_div(count, n);
    return (count % n == 0 ? 1 : 2) * n * chunk * elem;
  }
  return 0;
}

size_t MpiCommunicator::scratch_allocated() const {
  size_t total = 0;
  for (const auto& s : slots_) total += s->buf.size();
  total += shm_allocated();  // this rank's segment of the shared-memory window
  return total;
}

// ---------------------------------------------------------------------------------------------
// Checks

void MpiCommunicator::check_mpi(int rc, const char* call, CollectiveKind op, size_t count,
                                DType dtype) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(ErrorCode::kCommunication, "{}: {} failed on rank {} of {} (count {} x {}, {} bytes): {}",
       collective_kind_name(op), call, rank_, size_, count, dtype_name(dtype),
       count * dtype_size(dtype), std::string(text, static_cast<size_t>(len)));
}

void MpiCommunicator::validate(CollectiveKind kind, const void* send, const void* recv,
                               size_t count, DType dtype, ReduceOp op, int root) const {
  check_collective_args(kind, send, recv, count, dtype, op, root, rank_, size_);
}

void MpiCommunicator::check_agreement(CollectiveKind kind, size_t count, DType dtype, ReduceOp op,
                                      int root) {
  if (!options_.check_collectives) return;
  const int64_t mine[4] = {static_cast<int64_t>(count), static_cast<int64_t>(dtype),
                           static_cast<int64_t>(op), root};
  int64_t v[8];
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = mine[i];
    v[2 * i + 1] = -mine[i];
  }
  // Why a blocking all-reduce: every rank must learn the same verdict and throw together.
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_INT64_T, MPI_MAX, comm_),
            "MPI_Allreduce (ZS_CHECK_COLLECTIVES)", kind, count, dtype);
  static const char* what[4] = {"count", "dtype", "reduce op", "root"};
  for (int i = 0; i < 4; ++i) {
    const int64_t hi = v[2 * i], lo = -v[2 * i + 1];
    ZS_CHECK(hi == lo, ErrorCode::kCommunication,
             "{}: ranks disagree on the {} (min {}, max {}); rank {} of {} passed {} (count {} x "
             "{})",
             collective_kind_name(kind), what[i], lo, hi, rank_, size_, mine[i], count,
             dtype_name(dtype));
  }
}

void MpiCommunicator::count_bytes(CollectiveKind kind, size_t count, DType dtype, int root) {
  counters_.record(kind, count, dtype, root, rank_, size_);
}

// ---------------------------------------------------------------------------------------------
// Chunked MPI primitives

void MpiCommunicator::allgather_raw(const void* send, void* recv, size_t count, DType dt,
                                    std::vector<MPI_Request>* reqs, CollectiveKind op,
                                    MPI_Comm comm) {
  const size_t elem = dtype_size(dt);
  const bool in_place = send == bytes(recv) + static_cast<size_t>(rank_) * count * elem;
  if (count <= chunk_limit_) {
    const void* s = in_place ? MPI_IN_PLACE : send;
    const int c = static_cast<int>(count);
    if (reqs == nullptr) {
      check_mpi(MPI_Allgather(s, c, base_type(elem), recv, c, base_type(elem), comm),
                "MPI_Allgather", op, count, dt);
    } else {
      reqs->emplace_back();
      check_mpi(
          MPI_Iallgather(s, c, base_type(elem), recv, c, base_type(elem), comm, &reqs->back()),
          "MPI_Iallgather", op, count, dt);
    }
    return;
  }
  for (size_t off = 0; off < count; off += chunk_limit_) {
    const size_t len = std::min(chunk_limit_, count - off);
    ChunkTypes t(len, count, elem);
    const void* s = in_place ? MPI_IN_PLACE : bytes(send) + off * elem;
    char* r = bytes(recv) + off * elem;
    if (reqs == nullptr) {
      check_mpi(MPI_Allgather(s, 1, t.piece, r, 1, t.strided, comm), "MPI_Allgather", op, count,
                dt);
    } else {
      reqs->emplace_back();
      check_mpi(MPI_Iallgather(s, 1, t.piece, r, 1, t.strided, comm, &reqs->back()),
                "MPI_Iallgather", op, count, dt);
    }
  }
}

void MpiCommunicator::alltoall_raw(const void* send, void* recv, size_t count, DType dt,
                                   std::vector<MPI_Request>* reqs, CollectiveKind op) {
  const size_t elem = dtype_size(dt);
  if (count <= chunk_limit_) {
    const int c = static_cast<int>(count);
    if (reqs == nullptr) {
      check_mpi(MPI_Alltoall(send, c, base_type(elem), recv, c, base_type(elem), comm_),
                "MPI_Alltoall", op, count, dt);
    } else {
      reqs->emplace_back();
      check_mpi(
          MPI_Ialltoall(send, c, base_type(elem), recv, c, base_type(elem), comm_, &reqs->back()),
          "MPI_Ialltoall", op, count, dt);
    }
    return;
  }
  for (size_t off = 0; off < count; off += chunk_limit_) {
    const size_t len = std::min(chunk_limit_, count - off);
    ChunkTypes t(len, count, elem);
    const char* s = bytes(send) + off * elem;
    char* r = bytes(recv) + off * elem;
    if (reqs == nullptr) {
      check_mpi(MPI_Alltoall(s, 1, t.strided, r, 1, t.strided, comm_), "MPI_Alltoall", op, count,
                dt);
    } else {
      reqs->emplace_back();
      check_mpi(MPI_Ialltoall(s, 1, t.strided, r, 1, t.strided, comm_, &reqs->back()),
                "MPI_Ialltoall", op, count, dt);
    }
  }
}

}  // namespace zs
