// qwZ's gather path ([Note: quantized weights] in runtime/engine_config.h): this rank's shard
// encoded as an int8 chunk in place in the slot's chunk area, the chunks all-gathered in place
// and decoded into the slot's compute-dtype parameters.
#include "runtime/paths/registry.h"

namespace zs::paths {

namespace {

class QuantizedGather final : public GatherPath {
 public:
  QuantizedGather(const PathConfig& c, const GroupLayout& l, const FrozenLayout& f, int rank)
      : P_(c.param_dtype),
        rank_(rank),
        q_(quantized_gather_layout(l, c.zeropp.quantized_weights_block)),
        slot_(gather_slot_layout(l, f, P_, c.zeropp.quantized_weights_block)) {}
  std::string name() const override { return "qwZ"; }
  GatherSlotLayout slot_layout() const override { return slot_; }
  void step_calls(int64_t visits, std::vector<PathCall>& out) const override {
    out.push_back({"qwZ all-gather", CollectiveKind::kAllGather, CommScope::kWorld, true, visits,
                   q_.chunk_bytes, DType::kU8});
  }
  void connect(const PathComms& comms, Buffer /*kept*/) override { comm_ = comms.group; }
  WorkHandle start(const void* shard, void* slot) override {
    uint8_t* chunks = static_cast<uint8_t*>(elem_at(slot, slot_.quant_offset, DType::kU8));
    uint8_t* mine = chunks + rank_ * q_.chunk_bytes;
    encode_weight_chunk(q_, shard, P_, mine);
    return comm_->start_all_gather(mine, chunks, static_cast<size_t>(q_.chunk_bytes), DType::kU8);
  }
  void finish(void* slot) override {
    decode_weight_chunks(
        q_, static_cast<const uint8_t*>(elem_at(slot, slot_.quant_offset, DType::kU8)), P_, slot);
  }

 private:
  DType P_;
  int rank_;
  QuantizedGatherLayout q_;
  GatherSlotLayout slot_;
  Communicator* comm_ = nullptr;
};

}  // namespace

extern const GatherEntry kQuantizedGather{
    "qwZ", [](const PathConfig& c) { return c.stage == 3 && c.zeropp.quantized_weights; },
    [](const PathConfig& c, const GroupLayout& l, const FrozenLayout& f,
       int rank) -> std::unique_ptr<GatherPath> {
      return std::make_unique<QuantizedGather>(c, l, f, rank);
    }};

}  // namespace zs::paths
