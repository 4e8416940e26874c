#include "runtime/muon_update.h"

#include <algorithm>
#include <cstring>

#include "collectives/flight_recorder.h"
#include "core/error.h"
#include "optim/muon.h"
#include "optim/newton_schulz.h"

namespace zs {

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

double newton_schulz_flops(const MuonMatrix& m, int ns_steps) {
  const double r = static_cast<double>(std::min(m.rows, m.cols));
  const double c = static_cast<double>(std::max(m.rows, m.cols));
  // Per iteration A = X X^T (2 r^2 c), A A (2 r^3), (b A + c A^2) X (2 r^2 c).
  return static_cast<double>(ns_steps) * (4.0 * r * r * c + 2.0 * r * r * r);
}

std::vector<int> muon_owners(const std::vector<MuonMatrix>& matrices, int ranks, int ns_steps) {
  std::vector<int> owner(matrices.size(), -1);
  std::vector<size_t> order;
  for (size_t p = 0; p < matrices.size(); ++p)
    if (matrices[p].muon()) order.push_back(p);
  // Largest first (ties: layout order), each to the least loaded rank (ties: the lowest).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return newton_schulz_flops(matrices[a], ns_steps) > newton_schulz_flops(matrices[b], ns_steps);
  });
  std::vector<double> load(static_cast<size_t>(std::max(ranks, 1)), 0.0);
  for (size_t p : order) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[p] = static_cast<int>(r);
    load[r] += newton_schulz_flops(matrices[p], ns_steps);
  }
  return owner;
}

void MuonUpdate::attach(int group, const GroupLayout& layout, std::vector<MuonMatrix> matrices) {
  ZS_ASSERT(static_cast<size_t>(group) == groups_.size());
  ZS_ASSERT(matrices.empty() || matrices.size() == layout.params.size());
  Group& g = groups_.emplace_back();
  g.layout = &layout;
  g.matrices = std::move(matrices);
  for (const MuonMatrix& m : g.matrices) g.any = g.any || m.muon();
  if (g.any) ZS_ASSERT(static_cast<int64_t>(u_.size()) >= 4 * layout.padded_numel);
  g.owners = muon_owners(g.matrices, layout.world, config_.optimizer.muon.ns_steps);
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
    optim::muon_momentum(element_at(grad, o, G), G, grad_scale, mc.momentum, s.momentum + o,
                         u + s.begin + o, seg.length);
  }
  // 2. The whole u on every rank: the shards in place (a whole state holds it already).
  const bool sharded = s.numel != l.padded_numel;
  if (sharded) {
    ZS_ASSERT(s.begin == l.shard_numel * shard_.rank() && s.numel == l.shard_numel);
    set_flight_tag("muon u");
    shard_.all_gather(u + s.begin, u, static_cast<size_t>(l.shard_numel), DType::kF32);
  }
  float* o_full = ns_.as<float>();
  auto step_of = [&](size_t p) {
    const MuonMatrix& m = g.matrices[p];
    return optim::make_muon_step(lr, config_.optimizer.adamw.weight_decay, specs[p].weight_decay,
                                 m.rows, m.cols);
  };
  if (!sharded) {
    // 3. A whole state: each matrix orthogonalised here and applied (no communication).
    for (size_t p = 0; p < g.matrices.size(); ++p) {
      const MuonMatrix& m = g.matrices[p];
      if (!m.muon()) continue;
      const ParamSlot& slot = l.params[p];
      ZS_ASSERT(m.rows * m.cols == slot.numel);
      optim::newton_schulz(u + slot.offset, m.rows, m.cols, mc.ns_steps, o_full,
                           o_full + slot.numel, config_.optimizer_threads);
      const optim::MuonStep step = step_of(p);
      for (const ShardSegment& seg : *s.segments) {
        if (seg.param != static_cast<int>(p)) continue;
        const int64_t o = seg.shard_offset;
        optim::muon_apply(s.master + o, o_full + seg.param_offset, seg.length, step,
                          out ? element_at(out, o, P) : nullptr, P);
      }
    }
    return;
  }
  // 3. [Note: Muon owners] Each matrix orthogonalised by its owner only, into u at the matrix's
  // place; every other element of u becomes -0.0; one reduce-scatter (sum) then hands each rank
  // its shard of the results. Every element has at most one contribution that is not -0.0, and
  // x + (-0.0) is x for every x (+0.0 and -0.0 included), so the sum is the owner's bits in any
  // order: the same bits as if each rank had orthogonalised the matrix itself.
  const int me = shard_.rank();
  float* const neg_zero_end = u + l.padded_numel;
  float* filled = u;  // u[.. filled) is done
  for (size_t p = 0; p < g.matrices.size(); ++p) {
    const MuonMatrix& m = g.matrices[p];
    if (!m.muon() || g.owners[p] != me) continue;
    const ParamSlot& slot = l.params[p];
    ZS_ASSERT(m.rows * m.cols == slot.numel);
    ZS_ASSERT(u + slot.offset >= filled);
    std::fill(filled, u + slot.offset, -0.0f);
    optim::newton_schulz(u + slot.offset, m.rows, m.cols, mc.ns_steps, o_full, o_full + slot.numel,
                         config_.optimizer_threads);
    std::copy_n(o_full, slot.numel, u + slot.offset);
    filled = u + slot.offset + slot.numel;
  }
  std::fill(filled, neg_zero_end, -0.0f);
  set_flight_tag("muon update");
  shard_.reduce_scatter(u, u + s.begin, static_cast<size_t>(l.shard_numel), DType::kF32,
                        ReduceOp::kSum);
  const float* o_shard = u + s.begin;  // indexed like s
  for (const ShardSegment& seg : *s.segments) {
    const size_t p = static_cast<size_t>(seg.param);
    if (!g.matrices[p].muon()) continue;
    const int64_t o = seg.shard_offset;
    optim::muon_apply(s.master + o, o_shard + o, seg.length, step_of(p),
                      out ? element_at(out, o, P) : nullptr, P);
  }
}

}  // namespace zs
