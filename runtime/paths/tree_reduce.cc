// The world-invariant reduce path ([Note: world-invariant reduction] in runtime/engine_config.h):
// every micro-batch is reduce-scattered over the ranks in the collectives' tree — into the
// lane's receive buffer (sharded gradients, k > 1), the shard (k = 1), or in place in this rank's
// region of the full buffer (stages 0-1, whose buffer is overwritten by each micro-batch) — and
// finish() adds the reduced shard into the micro-batch tree (runtime/micro_batch_tree.h) over
// the kept fp32 partial sums, the total landing in the gradient shard. fp32 gradients, host
// memory.
#include "core/error.h"
#include "runtime/micro_batch_tree.h"
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class TreeReduce final : public ReducePath {
 public:
  TreeReduce(const PathConfig& c, const GroupLayout& l, int rank)
      : G_(c.grad_dtype),
        sharded_(c.stage >= 2),
        k_(c.micro_batches),
        levels_(MicroBatchTree::levels(c.micro_batches)),
        full_(l.padded_numel),
        shard_(l.shard_numel),
        begin_(l.shard_begin(rank)) {
    int64_t held = 0;
    for (const ShardSegment& s : l.shard_segments(rank)) held += s.length;
    pad_shard_ = shard_ - held;
  }
  std::string name() const override { return sharded_ ? "tree (sharded)" : "tree (full buffer)"; }
  LaneNeeds lane_needs() const override {
    if (!sharded_) return {};
    return {2, /*scratch_per_lane=*/true, /*send=*/false, /*recv=*/k_ > 1, 0};
  }
  int64_t kept_bytes() const override { return 4 * levels_ * shard_; }
  int64_t kept_padding_bytes() const override { return 4 * levels_ * pad_shard_; }
  void step_calls(std::vector<PathCall>& out) const override {
    out.push_back({"grad reduce-scatter", CollectiveKind::kReduceScatter, CommScope::kWorld, true,
                   k_, shard_, G_});
  }
  void connect(const PathComms& comms, void* grads, DeviceOps& ops, Buffer kept) override {
    ZS_ASSERT(G_ == DType::kF32 && ops.host_accessible() &&
              kept.size() == static_cast<size_t>(kept_bytes()));
    comm_ = comms.group;
    grads_ = grads;
    ops_ = &ops;
    partials_ = std::move(kept);
    tree_ = MicroBatchTree(k_, shard_, partials_.as<float>());
  }
  WorkHandle start(const ReduceLane& lane, int micro, int micro_batches) override {
    const size_t shard = static_cast<size_t>(shard_);
    micro_ = micro;
    if (sharded_) {
      void* recv = micro_batches == 1 ? grads_ : lane.recv;
      ZS_ASSERT(recv != nullptr);
      received_ = recv;
      return comm_->start_reduce_scatter(lane.scratch, recv, shard, G_, ReduceOp::kSum);
    }
    ops_->convert(lane.scratch, DType::kF32, grads_, G_, full_);
    received_ = elem_at(grads_, begin_, G_);
    return comm_->start_reduce_scatter(grads_, received_, shard, G_, ReduceOp::kSum);
  }
  void finish() override {
    float* out = static_cast<float*>(sharded_ ? grads_ : elem_at(grads_, begin_, G_));
    tree_.add(micro_, static_cast<const float*>(received_), out);
  }
  bool holds_lane() const override { return sharded_; }

 private:
  DType G_;
  bool sharded_;
  int k_, levels_;
  int64_t full_, shard_, begin_, pad_shard_ = 0;
  Communicator* comm_ = nullptr;
  void* grads_ = nullptr;
  DeviceOps* ops_ = nullptr;
  Buffer partials_;
  MicroBatchTree tree_;
  int micro_ = 0;
  void* received_ = nullptr;
};

}  // namespace

extern const ReduceEntry kTreeReduce{
    "tree", [](const PathConfig& c) { return c.world_invariant; },
    [](const PathConfig& c, const GroupLayout& l, int rank) -> std::unique_ptr<ReducePath> {
      return std::make_unique<TreeReduce>(c, l, rank);
    }};

}  // namespace zs::paths
