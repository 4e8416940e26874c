// The full-buffer reduce path (stages 0-1): the micro-batches are summed into the group's full
// gradient buffer, and the last one starts one reduce-scatter in place; this rank's region of
// the buffer is then its reduced shard.
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class FullBufferReduce final : public ReducePath {
 public:
  FullBufferReduce(const PathConfig& c, const GroupLayout& l, int rank)
      : G_(c.grad_dtype),
        full_(l.padded_numel),
        shard_(l.shard_numel),
        begin_(l.shard_begin(rank)) {}
  std::string name() const override { return "full buffer"; }
  LaneNeeds lane_needs() const override { return {}; }
  void step_calls(std::vector<PathCall>& out) const override {
    out.push_back({"grad reduce-scatter", CollectiveKind::kReduceScatter, CommScope::kWorld, false,
                   1, shard_, G_});
  }
  void connect(const PathComms& comms, void* grads, DeviceOps& ops, Buffer /*kept*/) override {
    comm_ = comms.group;
    grads_ = grads;
    ops_ = &ops;
  }
  WorkHandle start(const ReduceLane& lane, int micro, int micro_batches) override {
    if (micro == 0) {
      ops_->convert(lane.scratch, DType::kF32, grads_, G_, full_);
    } else {
      ops_->accumulate(grads_, G_, lane.scratch, DType::kF32, full_);
    }
    if (micro != micro_batches - 1) return nullptr;
    return comm_->start_reduce_scatter(grads_, elem_at(grads_, begin_, G_),
                                       static_cast<size_t>(shard_), G_, ReduceOp::kSum);
  }
  bool holds_lane() const override { return false; }

 private:
  DType G_;
  int64_t full_, shard_, begin_;
  Communicator* comm_ = nullptr;
  void* grads_ = nullptr;
  DeviceOps* ops_ = nullptr;
};

}  // namespace

extern const ReduceEntry kFullBufferReduce{
    "full buffer", [](const PathConfig& c) { return c.stage < 2; },
    [](const PathConfig& c, const GroupLayout& l, int rank) -> std::unique_ptr<ReducePath> {
      return std::make_unique<FullBufferReduce>(c, l, rank);
    }};

}  // namespace zs::paths
