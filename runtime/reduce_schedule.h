// The gradient reductions in flight, the twin of GatherSchedule (runtime/gather_schedule.h).
//
// A backward visits the groups in reverse order; for each one the engine asks the schedule for
// the gradient views to compute into (acquire), runs the unit's backward, and hands the gradient
// over (start). The schedule owns the reduce lanes (ReduceLane in runtime/reduce_path.h: fp32
// scratch, cast send buffer, receive buffer; runtime/buffer_plan.h sizes them) and the per-lane
// GradViews of every group. A policy that reduces every micro-batch (policy.shard_grads) alternates
// two lanes, so one unit computes while the previous one's reduce-scatter is in flight; a lane's
// reduction is finished only when the lane is needed again. Otherwise one lane, whose scratch is
// folded into the full gradient buffer at once (ParamGroup::start_reduce). A lane also lends its
// reduce path's own area when the path has one (qgZ's chunks).
//
// Reductions are finished oldest first. With replicas ([Note: hybrid sharding] in
// runtime/engine_config.h) the schedule starts, when a group's last reduce-scatter of the step is
// finished, the in-place all-reduce of its gradient shard across the replica group (once per
// group and step); it holds no lane and joins the back of the queue. A group's gradient is final
// (on_final) when its last reduction, the replica stage included, is finished.
//
// Collective: acquire, start, finish_all start and finish collectives in the same order on every
// rank. Buffers are allocated in the constructor (MemCategory::kCommBuffers). Destroying the
// schedule waits for the reductions in flight (it must go before the groups it was given).
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "device/device_ops.h"
#include "runtime/buffer_plan.h"
#include "runtime/param_group.h"
#include "unit/unit.h"

namespace zs {

class ReduceSchedule {
 public:
  // What the schedule works with. `groups` must outlive the schedule; `replicas` is null or the
  // replica group's communicator; `on_final` is called once per group and step, in the order the
  // gradients become final.
  struct Config {
    const BufferPlan* plan = nullptr;
    bool two_lanes = false;  // BufferPlan::lanes == 2: a reduction in flight per lane
    int micro_batches = 1;   // per step (sizes the queue once)
    std::span<ParamGroup> groups;
    Communicator* replicas = nullptr;
    DeviceOps* ops = nullptr;
    MemoryTracker* tracker = nullptr;
    std::function<void(ParamGroup&)> on_final;
  };
  explicit ReduceSchedule(Config cfg);
  ~ReduceSchedule();
  ReduceSchedule(const ReduceSchedule&) = delete;
  ReduceSchedule& operator=(const ReduceSchedule&) = delete;

  // The views group `g`'s backward writes its fp32 gradient into: the lane whose turn it is,
  // once its previous reduction and any of `g`'s own are finished, its scratch zeroed.
  GradViews& acquire(ParamGroup& g);
  // The fp32 scratch of the last acquire (until start): the group's full gradient, zeroed.
  float* acquired_scratch() const { return lanes_[static_cast<size_t>(acquired_)].scratch; }
  // `g` (the group of the last acquire) wrote its gradient of micro-batch `micro` of
  // `micro_batches`: starts its reduction (ParamGroup::start_reduce) on the acquired lane.
  void start(ParamGroup& g, int micro, int micro_batches);
  // Finishes every reduction in flight, oldest first (the end of a step's backward).
  void finish_all();
  // Reductions (and replica stages) in flight.
  size_t in_flight() const { return queue_.size() - head_; }
  // Lane `b`'s buffers (lanes() of them), in turn order.
  const ReduceLane& lane(size_t b) const { return lanes_[b]; }
  size_t lanes() const { return lanes_.size(); }

 private:
  // One reduction in flight: the group's own (replica == null) or its replica all-reduce.
  struct Flight {
    ParamGroup* group;
    WorkHandle replica;
  };
  void make_lanes(bool two_lanes);
  void make_views();
  size_t lanes_in_use() const;
  void finish_oldest();
  void start_replica_stage(ParamGroup& g);

  std::span<ParamGroup> groups_;
  Communicator* replicas_;
  DeviceOps& ops_;
  std::function<void(ParamGroup&)> on_final_;
  std::vector<Buffer> scratch_, send_, recv_, area_;
  std::vector<ReduceLane> lanes_;
  std::vector<size_t> lane_scratch_;           // lane -> index in scratch_
  std::vector<std::vector<GradViews>> views_;  // [group][scratch]
  std::vector<std::string> replica_tags_;      // "<name> replica reduce", per group
  std::vector<Flight> queue_;                  // started, oldest first from head_
  size_t head_ = 0;
  int64_t turn_ = 0;
  int acquired_ = -1;  // lane of the last acquire, until start
};

}  // namespace zs
