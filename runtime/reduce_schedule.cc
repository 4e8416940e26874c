#include "runtime/reduce_schedule.h"

#include "collectives/flight_recorder.h"
#include "core/error.h"

namespace zs {

namespace {

std::vector<Buffer> allocate(int count, int64_t bytes, MemoryTracker* tracker, Allocator* alloc) {
  std::vector<Buffer> out;
  for (int i = 0; i < count; ++i) {
    out.emplace_back(static_cast<size_t>(bytes), MemCategory::kCommBuffers, tracker, alloc);
  }
  return out;
}

}  // namespace

ReduceSchedule::ReduceSchedule(Config cfg)
    : groups_(cfg.groups),
      replicas_(cfg.replicas),
      ops_(*cfg.ops),
      on_final_(std::move(cfg.on_final)) {
  const BufferPlan& plan = *cfg.plan;
  Allocator* alloc = &ops_.allocator();
  scratch_ = allocate(plan.grad_scratch_count, plan.grad_scratch_bytes, cfg.tracker, alloc);
  send_ = allocate(plan.send_count, plan.send_bytes, cfg.tracker, alloc);
  recv_ = allocate(plan.recv_count, plan.recv_bytes, cfg.tracker, alloc);
  area_ = allocate(plan.lane_area_count, plan.lane_area_bytes, cfg.tracker, alloc);
  make_lanes(cfg.two_lanes);
  make_views();
  for (const ParamGroup& g : groups_) replica_tags_.push_back(g.name() + " replica reduce");
  queue_.reserve(static_cast<size_t>(cfg.micro_batches + 1) * groups_.size());
}

// A reduction still in flight when the engine unwinds (an error in a backward) is waited for
// here, while the groups and the lanes it reads and writes still exist.
ReduceSchedule::~ReduceSchedule() {
  for (size_t i = head_; i < queue_.size(); ++i) {
    if (queue_[i].replica) {
      queue_[i].replica.reset();
    } else {
      queue_[i].group->abandon_reduce();
    }
  }
}

// The fp32 scratch is per lane only when it is itself what is sent (fp32 gradients): the plan
// then has two; the cast send and receive buffers are per lane whenever there are any.
void ReduceSchedule::make_lanes(bool two_lanes) {
  const size_t n = two_lanes ? 2 : 1;
  for (size_t b = 0; b < n; ++b) {
    const size_t s = scratch_.size() > 1 ? b : 0;
    lane_scratch_.push_back(s);
    lanes_.push_back({scratch_.empty() ? nullptr : scratch_[s].as<float>(),
                      send_.empty() ? nullptr : send_[b].data(),
                      recv_.empty() ? nullptr : recv_[b].data(),
                      area_.empty() ? nullptr : static_cast<uint8_t*>(area_[b].data())});
  }
}

// Per group and scratch, in the unit's order: trainable parameters address the scratch, frozen
// ones have no span.
void ReduceSchedule::make_views() {
  views_.resize(groups_.size());
  for (ParamGroup& g : groups_) {
    const size_t n = g.specs().size() + g.frozen_specs().size() + g.tied_specs().size();
    for (Buffer& s : scratch_) {
      std::vector<float*> spans(n, nullptr);
      std::vector<int64_t> numels(n, 0);
      for (size_t p = 0; p < g.specs().size(); ++p) {
        const ParamSlot& slot = g.layout().params[p];
        spans[static_cast<size_t>(g.spec_index(p))] = s.as<float>() + slot.offset;
        numels[static_cast<size_t>(g.spec_index(p))] = slot.numel;
      }
      for (size_t t = 0; t < g.tied_specs().size(); ++t) {  // the owner's, the engine's buffer
        spans[static_cast<size_t>(g.tied_spec_index(t))] = g.tied_grad(t);
        numels[static_cast<size_t>(g.tied_spec_index(t))] = g.tied_specs()[t].numel();
      }
      for (size_t f = 0; f < g.frozen_specs().size(); ++f) {
        numels[static_cast<size_t>(g.frozen_spec_index(f))] = g.frozen_layout().records[f].numel;
      }
      views_[static_cast<size_t>(g.index())].emplace_back(std::move(spans), std::move(numels));
    }
  }
}

size_t ReduceSchedule::lanes_in_use() const {
  size_t n = 0;
  for (size_t i = head_; i < queue_.size(); ++i) {
    n += !queue_[i].replica && queue_[i].group->lane_busy();
  }
  return n;
}

GradViews& ReduceSchedule::acquire(ParamGroup& g) {
  ZS_ASSERT(acquired_ < 0);
  const size_t b = static_cast<size_t>(turn_++ % static_cast<int64_t>(lanes_.size()));
  // Lane b's previous reduction is the oldest of those in flight that use a lane, once as many
  // as there are lanes do (a replica all-reduce in flight uses none).
  while (lanes_in_use() >= lanes_.size()) finish_oldest();
  while (g.reducing()) finish_oldest();  // one unit: its previous micro-batch's
  acquired_ = static_cast<int>(b);
  ops_.zero(lanes_[b].scratch, static_cast<size_t>(g.layout().padded_numel) * sizeof(float));
  GradViews& gv = views_[static_cast<size_t>(g.index())][lane_scratch_[b]];
  gv.clear_produced();
  return gv;
}

void ReduceSchedule::start(ParamGroup& g, int micro, int micro_batches) {
  ZS_ASSERT(acquired_ >= 0);
  const ReduceLane& lane = lanes_[static_cast<size_t>(acquired_)];
  acquired_ = -1;
  g.start_reduce(lane, micro, micro_batches);
  if (g.reducing()) queue_.push_back({&g, nullptr});  // a group of frozen parameters only: none
}

void ReduceSchedule::finish_oldest() {
  ZS_ASSERT(head_ < queue_.size());
  Flight f = std::move(queue_[head_++]);
  if (f.replica) {
    f.replica->wait();
    on_final_(*f.group);
  } else if (f.group->finish_reduce()) {
    if (replicas_ != nullptr && replicas_->size() > 1) {
      start_replica_stage(*f.group);
    } else {
      on_final_(*f.group);
    }
  }
  if (head_ == queue_.size()) {
    queue_.clear();
    head_ = 0;
  }
}

// The shard group's sum of this shard, summed across the replica groups in place.
void ReduceSchedule::start_replica_stage(ParamGroup& g) {
  set_flight_tag(replica_tags_[static_cast<size_t>(g.index())].c_str());
  void* shard = const_cast<void*>(g.grad_shard());
  queue_.push_back(
      {&g, replicas_->start_all_reduce(shard, shard, static_cast<size_t>(g.layout().shard_numel),
                                       g.grad_dtype(), ReduceOp::kSum)});
}

void ReduceSchedule::finish_all() {
  ZS_ASSERT(acquired_ < 0);
  while (head_ < queue_.size()) finish_oldest();
  turn_ = 0;
}

}  // namespace zs
