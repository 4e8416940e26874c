#include "runtime/muon_update.h"

#include <cstring>

#include "collectives/flight_recorder.h"
#include "core/error.h"
#include "optim/muon.h"
#include "optim/newton_schulz.h"

namespace zs {

namespace {

const void* at(const void* p, int64_t elems, DType dt) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}
void* at(void* p, int64_t elems, DType dt) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace

MuonUpdate::MuonUpdate(const EngineConfig& config, const BufferPlan& plan, Communicator& shard,
                       MemoryTracker* tracker)
    : config_(config),
      shard_(shard),
      u_(static_cast<size_t>(plan.muon_u_bytes), MemCategory::kCommBuffers, tracker),
      ns_(static_cast<size_t>(plan.muon_ns_bytes), MemCategory::kCommBuffers, tracker) {
  // Elements of u no rank writes (AdamW parameters, padding) travel in the all-gather unread:
  // zero them once so that they are defined.
  if (!u_.empty()) std::memset(u_.data(), 0, u_.size());
}

void MuonUpdate::attach(int group, const GroupLayout& layout, std::vector<MuonMatrix> matrices) {
  ZS_ASSERT(static_cast<size_t>(group) == groups_.size());
  ZS_ASSERT(matrices.empty() || matrices.size() == layout.params.size());
  Group& g = groups_.emplace_back();
  g.layout = &layout;
  g.matrices = std::move(matrices);
  for (const MuonMatrix& m : g.matrices) g.any = g.any || m.muon();
  if (g.any) ZS_ASSERT(static_cast<int64_t>(u_.size()) >= 4 * layout.padded_numel);
}

bool MuonUpdate::is_muon(int group, int param) const {
  const Group& g = groups_.at(static_cast<size_t>(group));
  return !g.matrices.empty() && g.matrices.at(static_cast<size_t>(param)).muon();
}

void MuonUpdate::update(int group, const MuonShard& s, const void* grad, void* out, float lr,
                        float grad_scale, const std::vector<ParamSpec>& specs) {
  const Group& g = groups_.at(static_cast<size_t>(group));
  if (!g.any) return;
  const DType G = config_.precision.grad_dtype, P = config_.precision.param_dtype;
  const optim::MuonConfig& mc = config_.optimizer.muon;
  const GroupLayout& l = *g.layout;
  float* u = u_.as<float>();  // [padded group]
  // 1. This rank's shard: momentum and Nesterov u, written at the elements' group positions.
  for (const ShardSegment& seg : *s.segments) {
    if (!g.matrices[static_cast<size_t>(seg.param)].muon()) continue;
    const int64_t o = seg.shard_offset;
    optim::muon_momentum(at(grad, o, G), G, grad_scale, mc.momentum, s.momentum + o,
                         u + s.begin + o, seg.length);
  }
  // 2. The whole u on every rank: the shards in place (a whole state holds it already).
  if (s.numel != l.padded_numel) {
    ZS_ASSERT(s.begin == l.shard_numel * shard_.rank() && s.numel == l.shard_numel);
    set_flight_tag("muon u");
    shard_.all_gather(u + s.begin, u, static_cast<size_t>(l.shard_numel), DType::kF32);
  }
  // 3. Each matrix orthogonalised whole (the same bits on every rank), applied to this rank's
  // segments of it.
  float* o_full = ns_.as<float>();
  for (size_t p = 0; p < g.matrices.size(); ++p) {
    const MuonMatrix& m = g.matrices[p];
    if (!m.muon()) continue;
    const ParamSlot& slot = l.params[p];
    ZS_ASSERT(m.rows * m.cols == slot.numel);
    bool held = false;
    for (const ShardSegment& seg : *s.segments) held = held || seg.param == static_cast<int>(p);
    if (!held) continue;  // no element of it here: its result would be unused
    optim::newton_schulz(u + slot.offset, m.rows, m.cols, mc.ns_steps, o_full, o_full + slot.numel,
                         config_.optimizer_threads);
    const optim::MuonStep step = optim::make_muon_step(lr, config_.optimizer.adamw.weight_decay,
                                                       specs[p].weight_decay, m.rows, m.cols);
    for (const ShardSegment& seg : *s.segments) {
      if (seg.param != static_cast<int>(p)) continue;
      const int64_t o = seg.shard_offset;
      optim::muon_apply(s.master + o, o_full + seg.param_offset, seg.length, step,
                        out ? at(out, o, P) : nullptr, P);
    }
  }
}

}  // namespace zs
