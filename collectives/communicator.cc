#include "collectives/communicator.h"

#include "core/error.h"

namespace zs {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "invalid";
}

std::string_view collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kCount:
      break;
  }
  return "invalid";
}

int64_t ByteCounters::total_sent() const {
  int64_t t = 0;
  for (int64_t s : sent) t += s;
  return t;
}

int64_t ByteCounters::total_received() const {
  int64_t t = 0;
  for (int64_t r : received) t += r;
  return t;
}

void check_collective_args(CollectiveKind kind, const void* send, const void* recv, size_t count,
                           DType dtype, ReduceOp op, int root, int rank, int size) {
  const auto name = collective_kind_name(kind);
  if (kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce) {
    ZS_CHECK(dtype_is_float(dtype), ErrorCode::kInvalidArgument,
             "{}: reduction ({}) on {} is not supported (rank {}, count {}); reductions are "
             "defined for fp32, fp16, bf16 and fp64",
             name, reduce_op_name(op), dtype_name(dtype), rank, count);
    ZS_CHECK(op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kMax,
             ErrorCode::kInvalidArgument, "{}: invalid reduce op {} (rank {})", name,
             static_cast<int>(op), rank);
  }
  const size_t elem = dtype_size(dtype);
  const size_t blocks =
      (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter ||
       kind == CollectiveKind::kAllToAll)
          ? static_cast<size_t>(size)
          : 1;
  size_t total = 0;
  ZS_CHECK(!__builtin_mul_overflow(count, elem, &total) &&
               !__builtin_mul_overflow(total, blocks, &total),
           ErrorCode::kInvalidArgument,
           "{}: count {} x {} ({} bytes each) x {} ranks overflows size_t (rank {})", name, count,
           dtype_name(dtype), elem, blocks, rank);
  if (count > 0) {
    ZS_CHECK(send != nullptr, ErrorCode::kInvalidArgument,
             "{}: null send buffer with count {} x {} on rank {} of {}", name, count,
             dtype_name(dtype), rank, size);
    ZS_CHECK(recv != nullptr, ErrorCode::kInvalidArgument,
             "{}: null receive buffer with count {} x {} on rank {} of {}", name, count,
             dtype_name(dtype), rank, size);
  }
  if (kind == CollectiveKind::kBroadcast) {
    ZS_CHECK(root >= 0 && root < size, ErrorCode::kInvalidArgument,
             "{}: root {} is outside [0, {}) (rank {}, count {} x {})", name, root, size, rank,
             count, dtype_name(dtype));
  }
}

void ByteCounters::record(CollectiveKind kind, size_t count, DType dtype, int root, int rank,
                          int size) {
  const int k = static_cast<int>(kind);
  calls[k] += 1;
  if (size == 1) return;
  const int64_t n = size;
  const int64_t c = static_cast<int64_t>(count) * static_cast<int64_t>(dtype_size(dtype));
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      sent[k] += (n - 1) * c;
      received[k] += (n - 1) * c;
      break;
    case CollectiveKind::kAllReduce: {
      const int64_t piece =
          static_cast<int64_t>(((count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n))) *
          static_cast<int64_t>(dtype_size(dtype));
      sent[k] += 2 * (n - 1) * piece;
      received[k] += 2 * (n - 1) * piece;
      break;
    }
    case CollectiveKind::kBroadcast:
      if (rank == root) {
        sent[k] += c * (n - 1);
      } else {
        received[k] += c;
      }
      break;
    default:
      break;
  }
}

std::string broadcast_string(Communicator& comm, const std::string& s, int root) {
  uint64_t n = s.size();
  comm.broadcast(&n, sizeof(n), DType::kU8, root);
  std::string out = comm.rank() == root ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) comm.broadcast(out.data(), static_cast<size_t>(n), DType::kU8, root);
  return out;
}

}  // namespace zs
