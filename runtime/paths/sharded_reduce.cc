// The sharded reduce path (stages 2-3): each micro-batch's gradient is reduce-scattered (cast to
// the gradient dtype through the lane's send buffer when that is not fp32) into the shard (the
// first micro-batch) or the lane's receive buffer, which finish() adds into the shard.
#include "core/error.h"
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class ShardedReduce final : public ReducePath {
 public:
  ShardedReduce(const PathConfig& c, const GroupLayout& l)
      : G_(c.grad_dtype), k_(c.micro_batches), full_(l.padded_numel), shard_(l.shard_numel) {}
  std::string name() const override { return "sharded"; }
  LaneNeeds lane_needs() const override {
    const bool fp32 = G_ == DType::kF32;
    return {2, /*scratch_per_lane=*/fp32, /*send=*/!fp32, /*recv=*/k_ > 1, 0};
  }
  void step_calls(std::vector<PathCall>& out) const override {
    out.push_back({"grad reduce-scatter", CollectiveKind::kReduceScatter, CommScope::kWorld, true,
                   k_, shard_, G_});
  }
  void connect(const PathComms& comms, void* grads, DeviceOps& ops, Buffer /*kept*/) override {
    comm_ = comms.group;
    ops_ = &ops;
    into_.connect(grads, ops, G_, shard_);
  }
  WorkHandle start(const ReduceLane& lane, int micro, int /*micro_batches*/) override {
    const void* send = lane.scratch;
    if (G_ != DType::kF32) {
      ops_->convert(lane.scratch, DType::kF32, lane.send, G_, full_);
      send = lane.send;
    }
    void* recv = into_.destination(lane, micro);
    ZS_ASSERT(recv != nullptr);
    return comm_->start_reduce_scatter(send, recv, static_cast<size_t>(shard_), G_, ReduceOp::kSum);
  }
  void finish() override { into_.finish(); }
  bool holds_lane() const override { return true; }

 private:
  DType G_;
  int k_;
  int64_t full_, shard_;
  Communicator* comm_ = nullptr;
  DeviceOps* ops_ = nullptr;
  ShardAccumulator into_;
};

}  // namespace

extern const ReduceEntry kShardedReduce{
    "sharded", [](const PathConfig& c) { return c.stage >= 2; },
    [](const PathConfig& c, const GroupLayout& l, int) -> std::unique_ptr<ReducePath> {
      return std::make_unique<ShardedReduce>(c, l);
    }};

}  // namespace zs::paths
