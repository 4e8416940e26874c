#include "runtime/buffer_plan.h"

#include <algorithm>

#include "core/error.h"
#include "optim/newton_schulz.h"
#include "runtime/gather_path.h"
#include "runtime/reduce_path.h"

namespace zs {

namespace {

int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

// What the configuration decides for every unit.
struct Rules {
  int stage;
  int64_t P, G;  // bytes per parameter and per gradient element
  bool offload, params_are_master, adam, momentum, muon;
  int rank;
  const OptimizerConfig* optimizer;
  PathConfig paths;  // [Note: communication paths]
};

Rules rules_of(const EngineConfig& cfg, int rank) {
  Rules r;
  r.stage = static_cast<int>(cfg.stage);
  r.P = static_cast<int64_t>(dtype_size(cfg.precision.param_dtype));
  r.G = static_cast<int64_t>(dtype_size(cfg.precision.grad_dtype));
  r.offload = cfg.offload.optimizer;
  r.params_are_master = cfg.precision.param_dtype == DType::kF32 && !r.offload;
  r.adam = uses_adamw(cfg.optimizer.kind);
  r.momentum = r.adam || cfg.optimizer.sgd.momentum != 0.0f;
  r.muon = cfg.optimizer.kind == OptimizerKind::kMuon;
  r.rank = rank;
  r.optimizer = &cfg.optimizer;
  r.paths = path_config(cfg, /*hybrid=*/false);  // hybrid only moves the scopes
  return r;
}

// The largest gather slot and conversion buffer over the units seen so far, and what the reduce
// lanes must hold for all of them.
struct Maxima {
  int64_t slot = 0, convert = 0;
  LaneNeeds lanes;
  const char* area_label = nullptr;
};

// Unit u's frozen bytes (layout f): u.frozen_bytes, the padding they add to the plan, and the
// maxima.
void plan_frozen(const Rules& r, const FrozenLayout& f, UnitBufferPlan& u, BufferPlan& plan,
                 Maxima& max, bool own_convert) {
  const GroupLayout& fb = f.bytes;
  u.frozen_bytes = r.stage == 3 ? fb.shard_numel : fb.padded_numel;
  int64_t held = 0;  // record bytes in what this rank stores
  if (r.stage == 3) {
    for (const ShardSegment& s : fb.shard_segments(r.rank)) held += s.length;
  } else {
    held = fb.numel;
  }
  plan.padding_bytes_ += u.frozen_bytes - held;
  if (own_convert) {
    u.own_convert_bytes = r.P * f.convert_numel;
  } else {
    max.convert = std::max(max.convert, f.convert_numel);
  }
}

// Per unit: whether it owns a frozen tied parameter and converts frozen parameters (then it has
// a conversion buffer of its own).
std::vector<char> owners_converting(const std::vector<TiedParam>& ties,
                                    const std::vector<FrozenLayout>& frozen, size_t units) {
  std::vector<char> own(units, 0);
  for (const TiedParam& t : ties) {
    const size_t o = static_cast<size_t>(t.owner_unit);
    if (!t.trainable && !frozen.empty() && frozen[o].convert_numel > 0) own[o] = 1;
  }
  return own;
}

// [Note: Muon parameters]: the AdamW parameters' elements among a state's segments (the whole
// group's when `whole`, else rank `rank`'s shard).
int64_t adamw_elements(const GroupLayout& l, bool whole, int rank,
                       const std::vector<MuonMatrix>& muon) {
  int64_t n = 0;
  for (const ShardSegment& s : master_segments(l, whole, rank))
    if (muon.empty() || !muon[static_cast<size_t>(s.param)].muon()) n += s.length;
  return n;
}

// Muon's exp_avg_sq elements: the AdamW parameters' elements of the state, the largest over the
// ranks (sizes do not depend on the rank).
int64_t muon_second_moment(const GroupLayout& l, bool whole, const std::vector<MuonMatrix>& muon) {
  if (whole) return adamw_elements(l, true, 0, muon);
  int64_t n = 0;
  for (int q = 0; q < l.world; ++q) n = std::max(n, adamw_elements(l, false, q, muon));
  return n;
}

// Unit u's trainable buffers (layout l), and the padding they add to the plan.
void plan_trainable(const Rules& r, const GroupLayout& l, const std::vector<std::string>& names,
                    const std::vector<MuonMatrix>& muon, const GatherPath& gather,
                    const ReducePath& reduce, UnitBufferPlan& u, BufferPlan& plan) {
  const int64_t full = l.padded_numel;
  const int64_t shard = l.shard_numel;
  const int64_t pad_full = l.padding();
  // Padding inside one shard: the shard's elements that hold no parameter.
  int64_t shard_params = 0;
  for (const ShardSegment& s : l.shard_segments(r.rank)) shard_params += s.length;
  const int64_t pad_shard = shard - shard_params;

  u.params_bytes = r.P * (r.stage == 3 ? shard : full);
  u.grads_bytes = r.G * (r.stage >= 2 ? shard : full);
  u.gather_kept_bytes = gather.kept_bytes();
  u.reduce_kept_bytes = reduce.kept_bytes();
  u.master_numel = r.stage == 0 ? full : shard;
  u.master_begin = r.stage == 0 ? 0 : l.shard_begin(r.rank);
  u.master_bytes = r.params_are_master ? 0 : 4 * u.master_numel;
  const bool whole = u.master_numel == l.padded_numel;
  u.states = plan_state_storage(l, master_segments(l, whole, r.rank), *r.optimizer, names);
  const bool narrow = u.states.narrow();  // parameter elements only; the ranks' largest
  const int64_t capacity = narrow ? moment_capacity(l, whole, *r.optimizer, names) : 0;
  u.exp_avg_bytes = narrow ? capacity : r.momentum ? 4 * u.master_numel : 0;
  u.exp_avg_sq_bytes = narrow ? capacity : r.adam ? 4 * u.master_numel : 0;
  int64_t muon_v_pad = 0;  // exp_avg_sq elements that hold no AdamW element on this rank
  if (r.muon) {
    const int64_t v = muon_second_moment(l, whole, muon);
    u.exp_avg_sq_bytes = 4 * v;
    muon_v_pad = v - adamw_elements(l, whole, r.rank, muon);
  }
  if (r.offload) {  // carved from the host arena in 64-byte aligned spans
    u.master_category = u.optimizer_category = MemCategory::kHostOffload;
    u.master_bytes = round64(u.master_bytes);
    u.exp_avg_bytes = round64(u.exp_avg_bytes);
    u.exp_avg_sq_bytes = round64(u.exp_avg_sq_bytes);
  }

  const int64_t pad_p = r.stage == 3 ? pad_shard : pad_full;
  const int64_t pad_g = r.stage >= 2 ? pad_shard : pad_full;
  const int64_t pad_o = r.stage == 0 ? pad_full : pad_shard;
  const int64_t state_pad = narrow   ? 2 * (capacity - u.states.moment_bytes())
                            : r.muon ? 4 * pad_o + 4 * muon_v_pad
                                     : ((r.momentum ? 4 : 0) + (r.adam ? 4 : 0)) * pad_o;
  plan.padding_bytes_ += r.P * pad_p + r.G * pad_g + (u.master_bytes ? 4 : 0) * pad_o + state_pad +
                         gather.kept_padding_bytes() + reduce.kept_padding_bytes();
}

// Muon's shared buffers, grown to unit l's need: its u and its largest matrix's Newton-Schulz.
void plan_muon(const GroupLayout& l, const std::vector<MuonMatrix>& muon, BufferPlan& plan) {
  for (const MuonMatrix& m : muon) {
    if (!m.muon()) continue;
    plan.muon_u_bytes = std::max(plan.muon_u_bytes, 4 * l.padded_numel);
    const int64_t ns = m.rows * m.cols + optim::newton_schulz_workspace(m.rows, m.cols);
    plan.muon_ns_bytes = std::max(plan.muon_ns_bytes, 4 * ns);
  }
}

// The union of what the reduce lanes must hold for `path`'s group and the groups before it.
void add_lane_needs(const ReducePath& path, Maxima& max) {
  const LaneNeeds n = path.lane_needs();
  LaneNeeds& m = max.lanes;
  m.lanes = std::max(m.lanes, n.lanes);
  m.scratch_per_lane = m.scratch_per_lane || n.scratch_per_lane;
  m.send = m.send || n.send;
  m.recv = m.recv || n.recv;
  m.area_bytes = std::max(m.area_bytes, n.area_bytes);
  if (path.area_label()) max.area_label = path.area_label();
}

// The buffers shared by all units: scratch, send and receive, gather slots, conversion and the
// device's control buffer.
void plan_shared(const Rules& r, const EngineConfig& cfg, const Maxima& max, bool on_device,
                 int64_t ranks, size_t units, BufferPlan& plan) {
  // The lanes hold what the groups' reduce paths ask for (runtime/reduce_path.h).
  const LaneNeeds& n = max.lanes;
  plan.lanes = n.lanes;
  plan.grad_scratch_count = n.scratch_per_lane ? n.lanes : 1;
  plan.grad_scratch_bytes = 4 * plan.max_padded_numel;
  plan.send_count = n.send ? n.lanes : 0;
  plan.send_bytes = r.G * plan.max_padded_numel;
  plan.recv_count = n.recv ? n.lanes : 0;
  plan.recv_bytes = r.G * plan.max_shard_numel;
  plan.lane_area_count = max.area_label ? n.lanes : 0;
  plan.lane_area_bytes = n.area_bytes;
  plan.lane_area_label = max.area_label ? max.area_label : "";
  plan.gather_count = r.stage == 3 ? cfg.prefetch + 1 + plan.held_slots : 0;
  plan.gather_bytes = max.slot;
  plan.convert_bytes = r.P * max.convert;
  if (on_device && units > 0) {
    plan.ctrl_bytes = 8 * std::max<int64_t>(ranks, 2 + static_cast<int64_t>(units));
  }
}

}  // namespace

BufferPlan plan_engine_buffers(const std::vector<GroupLayout>& layouts,
                               const std::vector<FrozenLayout>& frozen, const EngineConfig& cfg,
                               int rank, bool on_device, int world,
                               const std::vector<TiedParam>& ties,
                               const std::vector<std::vector<std::string>>& names,
                               const MuonMatrices& muon) {
  ZS_CHECK(frozen.empty() || frozen.size() == layouts.size(), ErrorCode::kInvalidArgument,
           "{} frozen layouts for {} units", frozen.size(), layouts.size());
  ZS_CHECK(names.empty() || names.size() == layouts.size(), ErrorCode::kInvalidArgument,
           "parameter names for {} units, {} layouts", names.size(), layouts.size());
  ZS_CHECK(muon.empty() || muon.size() == layouts.size(), ErrorCode::kInvalidArgument,
           "Muon matrices for {} units, {} layouts", muon.size(), layouts.size());
  check_state_fp32_patterns(cfg.optimizer, names);
  const std::vector<std::string> unnamed;
  const std::vector<MuonMatrix> no_muon;
  BufferPlan plan;
  const Rules r = rules_of(cfg, rank);
  Maxima max;
  const std::vector<char> own = owners_converting(ties, frozen, layouts.size());
  for (size_t i = 0; i < layouts.size(); ++i) {
    const GroupLayout& l = layouts[i];
    UnitBufferPlan u;
    if (!frozen.empty() && !frozen[i].empty()) plan_frozen(r, frozen[i], u, plan, max, own[i]);
    const FrozenLayout none;
    const FrozenLayout& f = frozen.empty() ? none : frozen[i];
    // [Note: communication paths]: what the group's paths need.
    const std::unique_ptr<GatherPath> gather = make_gather_path(r.paths, l, f, rank);
    const std::unique_ptr<ReducePath> reduce = make_reduce_path(r.paths, l, rank);
    max.slot = std::max(max.slot, gather->slot_layout().bytes);
    add_lane_needs(*reduce, max);
    const std::vector<MuonMatrix>& mu = muon.empty() ? no_muon : muon[i];
    ZS_CHECK(mu.empty() || mu.size() == l.params.size(), ErrorCode::kInvalidArgument,
             "unit {}: {} Muon entries for {} parameters", i, mu.size(), l.params.size());
    plan_trainable(r, l, names.empty() ? unnamed : names[i], r.muon ? mu : no_muon, *gather,
                   *reduce, u, plan);
    if (r.muon) plan_muon(l, mu, plan);
    if (r.offload && on_device) {
      plan.host_staging_bytes += round64(r.G * l.shard_numel) + round64(r.P * l.shard_numel);
    }
    plan.units.push_back(u);
    plan.max_padded_numel = std::max(plan.max_padded_numel, l.padded_numel);
    plan.max_shard_numel = std::max(plan.max_shard_numel, l.shard_numel);
  }
  for (const TiedParam& t : ties) plan.tied_grad_bytes += t.trainable ? 4 * t.numel : 0;
  if (r.stage == 3) plan.held_slots = static_cast<int>(tied_owner_units(ties).size());
  const int64_t ranks = world > 0 ? world : (layouts.empty() ? 0 : layouts.front().world);
  plan_shared(r, cfg, max, on_device, ranks, layouts.size(), plan);
  return plan;
}

int64_t BufferPlan::bytes(MemCategory c) const {
  int64_t b = 0;
  for (const UnitBufferPlan& u : units) {
    if (c == MemCategory::kParams) b += u.params_bytes + u.gather_kept_bytes;
    if (c == MemCategory::kGrads) b += u.grads_bytes + u.reduce_kept_bytes;
    if (c == u.master_category) b += u.master_bytes;
    if (c == u.optimizer_category) b += u.exp_avg_bytes + u.exp_avg_sq_bytes;
    if (c == MemCategory::kFrozen) b += u.frozen_bytes;
  }
  if (c == MemCategory::kHostOffload) b += host_staging_bytes;
  if (c == MemCategory::kCommBuffers) {
    b += grad_scratch_count * grad_scratch_bytes + send_count * send_bytes +
         recv_count * recv_bytes + lane_area_count * lane_area_bytes + gather_count * gather_bytes +
         convert_bytes + ctrl_bytes + tied_grad_bytes + muon_u_bytes + muon_ns_bytes;
    for (const UnitBufferPlan& u : units) b += u.own_convert_bytes;
  }
  return b;
}

int64_t BufferPlan::padding_bytes() const { return padding_bytes_; }

MuonMatrices muon_matrices(const OptimizerConfig& c, const std::vector<std::string>& unit_names,
                           const std::vector<std::vector<std::vector<int64_t>>>& shapes) {
  MuonMatrices out;
  if (c.kind != OptimizerKind::kMuon) return out;
  ZS_CHECK(unit_names.size() == shapes.size(), ErrorCode::kInvalidArgument,
           "{} unit names for {} units of parameter shapes", unit_names.size(), shapes.size());
  for (size_t u = 0; u < shapes.size(); ++u) {
    out.emplace_back();
    for (const std::vector<int64_t>& shape : shapes[u]) {
      MuonMatrix m;
      if (muon_param(c, unit_names[u], shape)) m = {shape[0], shape[1]};
      out.back().push_back(m);
    }
  }
  return out;
}

}  // namespace zs
