// qgZ's reduce path ([Note: quantized gradients] in runtime/quantized_reduce.h), stages 2-3: step
// 1 (within the node) when the reduction starts, step 2 (across nodes) in flight until its Work
// is waited for; a later micro-batch's result is received into the lane and added into the
// shard by finish().
#include "core/error.h"
#include "runtime/paths/registry.h"
#include "runtime/quantized_reduce.h"

namespace zs::paths {

namespace {

class QuantizedReduce final : public ReducePath {
 public:
  QuantizedReduce(const PathConfig& c, const GroupLayout& l)
      : G_(c.grad_dtype),
        k_(c.micro_batches),
        shard_(l.shard_numel),
        q_(quantized_reduce_layout(l, c.node_size > 0 ? c.node_size : l.world,
                                   c.zeropp.quantized_gradients_block)) {}
  std::string name() const override { return "qgZ"; }
  // The fp32 scratch is read only while step 1 runs and the chunks go from the lane's own area:
  // one scratch, no send buffers.
  LaneNeeds lane_needs() const override {
    return {2, /*scratch_per_lane=*/false, /*send=*/false, /*recv=*/k_ > 1, q_.bytes};
  }
  const char* area_label() const override { return "qgZ int8 chunks and partials"; }
  void step_calls(std::vector<PathCall>& out) const override {
    if (q_.local > 1) {
      out.push_back({"qgZ intra-node all-to-all", CollectiveKind::kAllToAll, CommScope::kNodeLocal,
                     false, k_, q_.nodes * q_.chunk_bytes, DType::kU8});
    }
    if (q_.nodes > 1) {
      out.push_back({"qgZ cross-node all-to-all", CollectiveKind::kAllToAll, CommScope::kCrossNode,
                     true, k_, q_.chunk_bytes, DType::kU8});
    }
  }
  void connect(const PathComms& comms, void* grads, DeviceOps& ops, Buffer /*kept*/) override {
    ZS_ASSERT(comms.node_local != nullptr && comms.cross_node != nullptr);
    node_local_ = comms.node_local;
    cross_node_ = comms.cross_node;
    into_.connect(grads, ops, G_, shard_);
  }
  WorkHandle start(const ReduceLane& lane, int micro, int /*micro_batches*/) override {
    void* recv = into_.destination(lane, micro);
    ZS_ASSERT(recv != nullptr && (lane.area != nullptr || q_.bytes == 0));
    return start_quantized_reduce(q_, lane.scratch, lane.area, *node_local_, *cross_node_, G_,
                                  recv);
  }
  void finish() override { into_.finish(); }
  bool holds_lane() const override { return true; }

 private:
  DType G_;
  int k_;
  int64_t shard_;
  QuantizedReduceLayout q_;
  Communicator* node_local_ = nullptr;
  Communicator* cross_node_ = nullptr;
  ShardAccumulator into_;
};

}  // namespace

extern const ReduceEntry kQuantizedReduce{
    "qgZ", [](const PathConfig& c) { return c.stage >= 2 && c.zeropp.quantized_gradients; },
    [](const PathConfig& c, const GroupLayout& l, int) -> std::unique_ptr<ReducePath> {
      return std::make_unique<QuantizedReduce>(c, l);
    }};

}  // namespace zs::paths
