#include "collectives/communicator.h"

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

}  // namespace zs
