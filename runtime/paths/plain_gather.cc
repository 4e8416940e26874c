// The plain gather path: the compute-dtype shards all-gathered over the shard group.
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class PlainGather final : public GatherPath {
 public:
  PlainGather(const PathConfig& c, const GroupLayout& l, const FrozenLayout& f)
      : P_(c.param_dtype), shard_(l.shard_numel), slot_(gather_slot_layout(l, f, P_, 0)) {}
  std::string name() const override { return "plain"; }
  GatherSlotLayout slot_layout() const override { return slot_; }
  void step_calls(int64_t visits, std::vector<PathCall>& out) const override {
    out.push_back({"param all-gather", CollectiveKind::kAllGather, CommScope::kWorld, true, visits,
                   shard_, P_});
  }
  void connect(const PathComms& comms, Buffer /*kept*/) override { comm_ = comms.group; }
  WorkHandle start(const void* shard, void* slot) override {
    return comm_->start_all_gather(shard, slot, static_cast<size_t>(shard_), P_);
  }

 private:
  DType P_;
  int64_t shard_;
  GatherSlotLayout slot_;
  Communicator* comm_ = nullptr;
};

}  // namespace

extern const GatherEntry kPlainGather{
    "plain", [](const PathConfig&) { return true; },
    [](const PathConfig& c, const GroupLayout& l, const FrozenLayout& f,
       int) -> std::unique_ptr<GatherPath> { return std::make_unique<PlainGather>(c, l, f); }};

}  // namespace zs::paths
