#include "runtime/buffer_plan.h"

#include <algorithm>

#include "core/error.h"

namespace zs {

BufferPlan plan_engine_buffers(const std::vector<GroupLayout>& layouts,
                               const std::vector<FrozenLayout>& frozen, const EngineConfig& cfg,
                               int rank, bool on_device, int world) {
  ZS_CHECK(frozen.empty() || frozen.size() == layouts.size(), ErrorCode::kInvalidArgument,
           "{} frozen layouts for {} units", frozen.size(), layouts.size());
  BufferPlan plan;
  const int stage = static_cast<int>(cfg.stage);
  const int64_t P = static_cast<int64_t>(dtype_size(cfg.precision.param_dtype));
  const int64_t G = static_cast<int64_t>(dtype_size(cfg.precision.grad_dtype));
  const bool offload = cfg.offload.optimizer;
  const bool params_are_master = cfg.precision.param_dtype == DType::kF32 && !offload;
  const bool adam = cfg.optimizer.kind == OptimizerKind::kAdamW;
  const bool momentum = adam || cfg.optimizer.sgd.momentum != 0.0f;
  auto round64 = [](int64_t b) { return (b + 63) / 64 * 64; };
  int64_t max_slot = 0, max_convert = 0;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const GroupLayout& l = layouts[i];
    UnitBufferPlan u;
    if (!frozen.empty() && !frozen[i].empty()) {
      const FrozenLayout& f = frozen[i];
      const GroupLayout& fb = f.bytes;
      u.frozen_bytes = stage == 3 ? fb.shard_numel : fb.padded_numel;
      int64_t held = 0;  // record bytes in what this rank stores
      if (stage == 3) {
        for (const ShardSegment& s : fb.shard_segments(rank)) held += s.length;
      } else {
        held = fb.numel;
      }
      plan.padding_bytes_ += u.frozen_bytes - held;
      max_slot = std::max(max_slot, round64(P * l.padded_numel) + fb.padded_numel);
      max_convert = std::max(max_convert, f.convert_numel);
    }
    max_slot = std::max(max_slot, P * l.padded_numel);
    const int64_t full = l.padded_numel;
    const int64_t shard = l.shard_numel;
    const int64_t pad_full = l.padding();
    // Padding inside one shard: the shard's elements that hold no parameter.
    int64_t shard_params = 0;
    for (const ShardSegment& s : l.shard_segments(rank)) shard_params += s.length;
    const int64_t pad_shard = shard - shard_params;

    u.params_bytes = P * (stage == 3 ? shard : full);
    u.grads_bytes = G * (stage >= 2 ? shard : full);
    u.master_numel = stage == 0 ? full : shard;
    u.master_begin = stage == 0 ? 0 : l.shard_begin(rank);
    u.master_bytes = params_are_master ? 0 : 4 * u.master_numel;
    u.exp_avg_bytes = momentum ? 4 * u.master_numel : 0;
    u.exp_avg_sq_bytes = adam ? 4 * u.master_numel : 0;
    if (offload) {  // carved from the host arena in 64-byte aligned spans
      u.master_category = u.optimizer_category = MemCategory::kHostOffload;
      u.master_bytes = round64(u.master_bytes);
      u.exp_avg_bytes = round64(u.exp_avg_bytes);
      u.exp_avg_sq_bytes = round64(u.exp_avg_sq_bytes);
    }

    const int64_t pad_p = stage == 3 ? pad_shard : pad_full;
    const int64_t pad_g = stage >= 2 ? pad_shard : pad_full;
    const int64_t pad_o = stage == 0 ? pad_full : pad_shard;
    plan.padding_bytes_ += P * pad_p + G * pad_g + (u.master_bytes ? 4 : 0) * pad_o +
                           (momentum ? 4 : 0) * pad_o + (adam ? 4 : 0) * pad_o;
    if (offload && on_device) {
      plan.host_staging_bytes += round64(G * shard) + round64(P * shard);
    }
    plan.units.push_back(u);
    plan.max_padded_numel = std::max(plan.max_padded_numel, full);
    plan.max_shard_numel = std::max(plan.max_shard_numel, shard);
  }
  const bool fp32_grads = cfg.precision.grad_dtype == DType::kF32;
  plan.grad_scratch_count = (stage >= 2 && fp32_grads) ? 2 : 1;
  plan.grad_scratch_bytes = 4 * plan.max_padded_numel;
  plan.send_count = (stage >= 2 && !fp32_grads) ? 2 : 0;
  plan.send_bytes = G * plan.max_padded_numel;
  plan.recv_count = (stage >= 2 && cfg.micro_batches > 1) ? 2 : 0;
  plan.recv_bytes = G * plan.max_shard_numel;
  plan.gather_count = stage == 3 ? cfg.prefetch + 1 : 0;
  plan.gather_bytes = max_slot;
  plan.convert_bytes = P * max_convert;
  if (on_device && !layouts.empty()) {
    const int64_t ranks = world > 0 ? world : layouts.front().world;
    plan.ctrl_bytes = 8 * std::max<int64_t>(ranks, 2 + static_cast<int64_t>(layouts.size()));
  }
  return plan;
}

int64_t BufferPlan::bytes(MemCategory c) const {
  int64_t b = 0;
  for (const UnitBufferPlan& u : units) {
    if (c == MemCategory::kParams) b += u.params_bytes;
    if (c == MemCategory::kGrads) b += u.grads_bytes;
    if (c == u.master_category) b += u.master_bytes;
    if (c == u.optimizer_category) b += u.exp_avg_bytes + u.exp_avg_sq_bytes;
    if (c == MemCategory::kFrozen) b += u.frozen_bytes;
  }
  if (c == MemCategory::kHostOffload) b += host_staging_bytes;
  if (c == MemCategory::kCommBuffers) {
    b += grad_scratch_count * grad_scratch_bytes + send_count * send_bytes +
         recv_count * recv_bytes + gather_count * gather_bytes + convert_bytes + ctrl_bytes;
  }
  return b;
}

int64_t BufferPlan::padding_bytes() const { return padding_bytes_; }

}  // namespace zs
