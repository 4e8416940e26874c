// hpZ's gather path ([Note: hpZ] in runtime/engine_config.h), over another: a gather that went
// over the shard group also copies this rank's part of the gathered parameters (elements
// [h * padded / K, (h + 1) * padded / K), h = its rank in the hpZ group of K) into the kept
// secondary shard, and until the parameters change every later gather all-gathers those parts
// within the hpZ group instead: the same bits, from within the node. The trainable parameters
// only; the frozen bytes are the group's and still gathered over the world.
#include <cstring>

#include "core/error.h"
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class SecondaryGather final : public GatherPath {
 public:
  SecondaryGather(std::unique_ptr<GatherPath> inner, const PathConfig& c, const GroupLayout& l,
                  int rank)
      : inner_(std::move(inner)),
        P_(c.param_dtype),
        K_(c.zeropp.hpz_partition_size),
        h_(rank % K_),
        part_(l.padded_numel / K_) {
    // The padding in this rank's part: the part is the world shards h * W/K .. (h + 1) * W/K - 1.
    const int per = l.world / K_;
    int64_t held = 0;
    for (int j = h_ * per; j < (h_ + 1) * per; ++j) {
      for (const ShardSegment& s : l.shard_segments(j)) held += s.length;
    }
    padding_ = part_ - held;
  }
  std::string name() const override { return "hpZ over " + inner_->name(); }
  GatherSlotLayout slot_layout() const override { return inner_->slot_layout(); }
  int64_t kept_bytes() const override { return part_ * size(); }
  int64_t kept_padding_bytes() const override { return padding_ * size(); }
  // The step's first gather goes over the world, the others within the group.
  void step_calls(int64_t visits, std::vector<PathCall>& out) const override {
    inner_->step_calls(1, out);
    out.push_back({"hpZ all-gather", CollectiveKind::kAllGather, CommScope::kHpzGroup, true,
                   visits - 1, part_, P_});
  }
  void connect(const PathComms& comms, Buffer kept) override {
    ZS_ASSERT(comms.hpz != nullptr && comms.hpz->size() == K_ && comms.hpz->rank() == h_ &&
              kept.size() == static_cast<size_t>(kept_bytes()));
    inner_->connect(comms, Buffer());
    hpz_ = comms.hpz;
    secondary_ = std::move(kept);
    valid_ = false;
  }
  WorkHandle start(const void* shard, void* slot) override {
    from_secondary_ = valid_;
    if (!from_secondary_) return inner_->start(shard, slot);
    return hpz_->start_all_gather(secondary_.data(), slot, static_cast<size_t>(part_), P_);
  }
  void finish(void* slot) override {
    if (from_secondary_) return;
    inner_->finish(slot);  // keep this rank's part for the later gathers of the step
    std::memcpy(secondary_.data(), elem_at(slot, part_ * h_, P_),
                static_cast<size_t>(kept_bytes()));
    valid_ = true;
  }
  void invalidate() override {
    valid_ = false;
    inner_->invalidate();
  }

 private:
  int64_t size() const { return static_cast<int64_t>(dtype_size(P_)); }
  std::unique_ptr<GatherPath> inner_;
  DType P_;
  int K_, h_;
  int64_t part_, padding_ = 0;
  Communicator* hpz_ = nullptr;
  Buffer secondary_;
  bool valid_ = false;           // secondary_ holds the current parameters
  bool from_secondary_ = false;  // the gather in flight reads secondary_
};

}  // namespace

extern const GatherWrapper kSecondaryGather{
    "hpZ", [](const PathConfig& c) { return c.stage == 3 && c.zeropp.hpz_partition_size > 1; },
    [](std::unique_ptr<GatherPath> inner, const PathConfig& c, const GroupLayout& l,
       int rank) -> std::unique_ptr<GatherPath> {
      return std::make_unique<SecondaryGather>(std::move(inner), c, l, rank);
    }};

}  // namespace zs::paths
