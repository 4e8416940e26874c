// How one group's gradient is reduced over the shard group ([Note: communication paths] in
// runtime/comm_path.h). ParamGroup starts and finishes each reduction through its path; the
// buffer plan sizes the reduce lanes and the kept bytes by asking it; the communication model
// asks it for the step's calls.
//
//   full buffer  stages 0-1: the micro-batches summed into the full gradient buffer, one in-place
//                reduce-scatter on the last (runtime/paths/full_buffer_reduce.cc)
//   sharded      stages 2-3: each micro-batch reduce-scattered (cast to the gradient dtype through
//                the lane), later ones added into the shard (paths/sharded_reduce.cc)
//   qgZ          stages 2-3: two int8 all-to-alls per micro-batch ([Note: quantized gradients];
//                paths/quantized_reduce_path.cc)
//   tree         world-invariant: every micro-batch reduce-scattered, the shards summed in the
//                micro-batch tree ([Note: world-invariant reduction]; paths/tree_reduce.cc)
//
// A path is made for one group's layout and rank; its planning queries work without
// communicators. Collective: start(); every rank calls it in the same order. Thread-safety: one
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "device/device_ops.h"
#include "runtime/comm_path.h"
#include "sharding/layout.h"

namespace zs {

// Buffers one gradient reduction uses, lent by ReduceSchedule for the duration of one reduction
// and sized by the buffer plan for the largest group (runtime/buffer_plan.h).
struct ReduceLane {
  float* scratch = nullptr;  // fp32, full group: the unit's backward writes its gradient here
  void* send = nullptr;      // grad dtype, full group; null when the path needs none
  void* recv = nullptr;      // grad dtype, one shard; null when the path needs none
  uint8_t* area = nullptr;   // the path's own bytes (qgZ's chunks and partials); null when none
};

// What a lane must hold for a group's path; the plan takes the union over the groups.
struct LaneNeeds {
  int lanes = 1;                  // 2: a reduction in flight while the next unit computes
  bool scratch_per_lane = false;  // the fp32 scratch is itself read by the reduction in flight
  bool send = false;              // a grad-dtype send buffer of the full group per lane
  bool recv = false;              // a grad-dtype receive buffer of one shard per lane
  int64_t area_bytes = 0;         // the path's own buffer per lane
};

class ReducePath {
 public:
  virtual ~ReducePath() = default;
  // "full buffer", "sharded", "qgZ", "tree (sharded)", ...
  virtual std::string name() const = 0;
  virtual LaneNeeds lane_needs() const = 0;
  // What the lanes' own area holds (for the planner's listing); null when none.
  virtual const char* area_label() const { return nullptr; }
  // Bytes the group keeps besides its gradient buffer (MemCategory::kGrads), and how many of
  // them are padding.
  virtual int64_t kept_bytes() const { return 0; }
  virtual int64_t kept_padding_bytes() const { return 0; }
  // The step's calls of this group's gradient reduction.
  virtual void step_calls(std::vector<PathCall>& out) const = 0;

  // The engine's communicators, the group's gradient buffer (full or shard as the stage keeps
  // it), the device and the kept buffer (kept_bytes()); once, before any start.
  virtual void connect(const PathComms& comms, void* grads, DeviceOps& ops, Buffer kept) = 0;
  // Micro-batch `micro` of `micro_batches` wrote its fp32 gradient to lane.scratch: folds it in,
  // or starts its reduction and returns it (the lane stays in use until finish() when
  // holds_lane()). Null: nothing is in flight (a full buffer before its last micro-batch).
  virtual WorkHandle start(const ReduceLane& lane, int micro, int micro_batches) = 0;
  // The Work start() returned has completed: adds its result into this rank's gradient shard.
  virtual void finish() {}
  // Whether a reduction in flight reads or writes its lane's buffers.
  virtual bool holds_lane() const = 0;
};

// The path of a group with layout `l` (its world is the shard group) on shard-group rank
// `rank`, as the registry (runtime/paths/registry.cc) chooses it for `c`.
std::unique_ptr<ReducePath> make_reduce_path(const PathConfig& c, const GroupLayout& l, int rank);

}  // namespace zs
