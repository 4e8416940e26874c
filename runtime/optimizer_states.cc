#include "runtime/optimizer_states.h"

#include <algorithm>

#include "core/convert.h"
#include "core/error.h"
#include "optim/clip.h"
#include "optim/cpu_adam.h"
#include "runtime/param_init.h"

namespace zs {

namespace {

// Master, m and v in the engine's device memory (host memory on the CPU backend).
class ResidentStates final : public OptimizerStates {
 public:
  ResidentStates(const EngineConfig& c, DeviceOps& ops, MemoryTracker* t, int rank)
      : OptimizerStates(c, ops, rank), tracker_(t) {}
  bool on_host() const override { return ops_.host_accessible(); }

  using OptimizerStates::view;
  MasterView view(size_t group, int64_t lo, int64_t n) override {
    MasterView v = OptimizerStates::view(group, lo, n);
    if (on_host()) return v;
    // Host copies of the device state (see Engine::shard_state).
    MasterShard& s = shards_.at(group);
    const size_t un = static_cast<size_t>(n);
    s.mirror.assign(3 * un, 0.0f);
    float* dst[3] = {s.mirror.data(), s.mirror.data() + un, s.mirror.data() + 2 * un};
    float* src[3] = {s.master_ptr, s.m, s.v};
    for (int k = 0; k < 3; ++k) {
      if (src[k]) ops_.copy_to_host(dst[k], src[k] + lo, un * sizeof(float));
    }
    v.master = dst[0];
    v.exp_avg = s.m ? dst[1] : nullptr;
    v.exp_avg_sq = s.v ? dst[2] : nullptr;
    s.mirror_written = true;
    return v;
  }
  void refresh(size_t group) override {
    if (on_host()) {
      OptimizerStates::refresh(group);
      return;
    }
    MasterShard& s = shards_.at(group);
    if (!s.mirror_written) return;
    const size_t un = static_cast<size_t>(s.mirror_n);
    float* dst[3] = {s.master_ptr, s.m, s.v};
    for (int k = 0; k < 3; ++k) {
      if (dst[k])
        ops_.copy_from_host(dst[k] + s.mirror_lo, s.mirror.data() + k * un, un * sizeof(float));
    }
    s.mirror_written = false;
  }

 protected:
  void allocate(MasterShard& s, const UnitBufferPlan& up, ParamGroup& g) override {
    Allocator* dev = &ops_.allocator();
    s.master = Buffer(up.master_bytes, up.master_category, tracker_, dev);
    s.exp_avg = Buffer(up.exp_avg_bytes, up.optimizer_category, tracker_, dev);
    s.exp_avg_sq = Buffer(up.exp_avg_sq_bytes, up.optimizer_category, tracker_, dev);
    place_moments(s, s.exp_avg.empty() ? nullptr : s.exp_avg.data(),
                  s.exp_avg_sq.empty() ? nullptr : s.exp_avg_sq.data());
    // fp32 compute: the parameters are the master (the replica's elements or the shard).
    s.master_ptr =
        up.master_bytes > 0 ? s.master.as<float>() : static_cast<float*>(g.param_at(s.begin));
  }
  void write_master(MasterShard& s, const float* host) override {
    if (on_host()) return;  // initialize() drew the values in place
    ops_.copy_from_host(s.master_ptr, host, static_cast<size_t>(s.numel) * sizeof(float));
  }

 private:
  MemoryTracker* tracker_;
};

// Master, m and v carved from one host arena (kHostOffload).
class HostArenaStates : public OptimizerStates {
 public:
  HostArenaStates(const EngineConfig& c, DeviceOps& ops, MemoryTracker* t, int rank,
                  int64_t arena_bytes)
      : OptimizerStates(c, ops, rank), arena_(arena_bytes, t) {
    offloaded_ = true;
  }
  bool on_host() const override { return true; }

 protected:
  void allocate(MasterShard& s, const UnitBufferPlan& up, ParamGroup& /*g*/) override {
    s.master_ptr = arena_.take(up.master_bytes / 4);
    place_moments(s, up.exp_avg_bytes ? arena_.take(up.exp_avg_bytes / 4) : nullptr,
                  up.exp_avg_sq_bytes ? arena_.take(up.exp_avg_sq_bytes / 4) : nullptr);
  }
  void write_master(MasterShard& /*s*/, const float* /*host*/) override {}

 private:
  offload::HostArena arena_;
};

// [Note: offload on a device] A device engine with an offloaded optimizer keeps master, m and v
// in the host arena. Each group's final gradient shard is copied to the page-locked staging
// arena on the copy stream as soon as its last reduction completes (stages 2-3: during the
// backward of the remaining units; stages 0-1: after the step's reductions). The CPU Adam then
// updates the master from the staged gradient and writes the compute-dtype shard into staging,
// which is uploaded on the compute stream ahead of the next all-gather or forward. On the CPU
// backend the shards are host memory and nothing is staged (HostArenaStates).
class StagedHostStates final : public HostArenaStates {
 public:
  StagedHostStates(const EngineConfig& c, DeviceOps& ops, MemoryTracker* t, int rank,
                   int64_t arena_bytes, int64_t staging_bytes)
      : HostArenaStates(c, ops, t, rank, arena_bytes), staging_(staging_bytes, t) {}

  void gradient_final(ParamGroup& g) override {
    MasterShard& s = shards_.at(static_cast<size_t>(g.index()));
    ops_.copy_to_host_async(s.host_grad, g.grad_shard(),
                            static_cast<size_t>(g.layout().shard_numel) * dtype_size(G()));
  }
  void wait_gradients() override { ops_.wait_host_copies(); }
  void cast_to_params(ParamGroup& g) override {  // cast on the host, then upload
    MasterShard& s = shards_.at(static_cast<size_t>(g.index()));
    convert(s.master_ptr, DType::kF32, s.host_out, P(), static_cast<size_t>(s.numel));
    ops_.copy_from_host_async(g.param_at(s.begin), s.host_out,
                              static_cast<size_t>(s.numel) * dtype_size(P()));
  }

 protected:
  void allocate(MasterShard& s, const UnitBufferPlan& up, ParamGroup& g) override {
    HostArenaStates::allocate(s, up, g);
    const int64_t n = g.layout().shard_numel;
    s.host_grad = staging_.take_bytes(static_cast<int64_t>(dtype_size(G())) * n);
    s.host_out = staging_.take_bytes(static_cast<int64_t>(dtype_size(P())) * n);
  }
  const void* update_grad(ParamGroup& /*g*/, MasterShard& s) override { return s.host_grad; }
  void* update_out(ParamGroup& /*g*/, MasterShard& s) override { return s.host_out; }
  std::optional<bool> update_span(MasterShard& s, const void* grad, void* out,
                                  const ShardSegment& seg, float* v, const optim::AdamWStep& adam,
                                  float /*lr*/, float /*grad_scale*/, bool /*decay*/) override {
    const int64_t o = seg.shard_offset;
    return optim::cpu_adamw(s.master_ptr + o, element_at(grad, o, G()), G(), s.m + o, v, seg.length,
                            adam, out ? element_at(out, o, P()) : nullptr, P());
  }
  void after_update(ParamGroup& g, MasterShard& s) override {
    ops_.copy_from_host_async(g.param_at(s.begin), s.host_out,
                              static_cast<size_t>(g.layout().shard_numel) * dtype_size(P()));
  }
  void write_master(MasterShard& /*s*/, const float* /*host*/) override {}

 private:
  DType P() const { return config_.precision.param_dtype; }
  DType G() const { return config_.precision.grad_dtype; }
  offload::HostArena staging_;
};

}  // namespace

std::unique_ptr<OptimizerStates> OptimizerStates::create(const EngineConfig& config,
                                                         const BufferPlan& plan, DeviceOps& ops,
                                                         MemoryTracker* tracker, int rank,
                                                         Communicator* shard) {
  if (config.optimizer.kind == OptimizerKind::kMuon) {
    // [Note: Muon parameters]: resident host states only (validate() and the engine refuse the
    // rest).
    ZS_ASSERT(!config.offload.optimizer && ops.host_accessible() && shard != nullptr);
    auto states = std::make_unique<ResidentStates>(config, ops, tracker, rank);
    states->muon_ = std::make_unique<MuonUpdate>(config, plan, *shard, tracker);
    return states;
  }
  if (!config.offload.optimizer)
    return std::make_unique<ResidentStates>(config, ops, tracker, rank);
  const int64_t arena = plan.bytes(MemCategory::kHostOffload) - plan.host_staging_bytes;
  if (ops.host_accessible()) {
    return std::make_unique<HostArenaStates>(config, ops, tracker, rank, arena);
  }
  return std::make_unique<StagedHostStates>(config, ops, tracker, rank, arena,
                                            plan.host_staging_bytes);
}

void OptimizerStates::attach(ParamGroup& g, const UnitBufferPlan& up,
                             std::vector<MuonMatrix> muon) {
  ZS_ASSERT(static_cast<size_t>(g.index()) == shards_.size());
  MasterShard& s = shards_.emplace_back();
  s.begin = up.master_begin;
  s.numel = up.master_numel;
  const GroupLayout& l = g.layout();
  // The whole group (one piece per parameter) or this rank's shard, as the plan has it.
  s.segments = master_segments(l, s.numel == l.padded_numel, rank_);
  s.storage = up.states;
  ZS_ASSERT(s.storage.segments.size() == (s.storage.narrow() ? s.segments.size() : 0));
  if (muon_) {
    // [Note: Muon parameters]: v holds the AdamW segments only, packed in segment order.
    int64_t v = 0;
    for (const ShardSegment& seg : s.segments) {
      const bool m = !muon.empty() && muon[static_cast<size_t>(seg.param)].muon();
      s.v_offsets.push_back(m ? -1 : v);
      v += m ? 0 : seg.length;
    }
    ZS_ASSERT(4 * v <= up.exp_avg_sq_bytes);
    muon_->attach(g.index(), l, std::move(muon));
  }
  allocate(s, up, g);
}

float* OptimizerStates::segment_v(const MasterShard& s, size_t k) {
  if (s.v == nullptr) return nullptr;
  if (s.v_offsets.empty()) return s.v + s.segments[k].shard_offset;
  ZS_ASSERT(s.v_offsets[k] >= 0);
  return s.v + s.v_offsets[k];
}

void OptimizerStates::place_moments(MasterShard& s, void* m, void* v) {
  if (!s.storage.narrow()) {
    s.m = static_cast<float*>(m);
    s.v = static_cast<float*>(v);
    return;
  }
  s.m_store = carve_moment(s.storage, m);
  s.v_store = carve_moment(s.storage, v);
}

void OptimizerStates::initialize(ParamGroup& g, uint64_t seed, int threads) {
  MasterShard& s = shards_.at(static_cast<size_t>(g.index()));
  // Drawn on the host: in place when the master is host memory, else into a staging copy.
  std::vector<float> host;
  float* master = s.master_ptr;
  if (!on_host()) {
    host.assign(static_cast<size_t>(s.numel), 0.0f);
    master = host.data();
  }
  for (const ShardSegment& seg : s.segments) {
    init_param_values(g.specs()[seg.param].init, seed, static_cast<uint32_t>(g.index()),
                      static_cast<uint32_t>(g.spec_index(static_cast<size_t>(seg.param))),
                      seg.param_offset, seg.length, master + seg.shard_offset, threads);
  }
  write_master(s, master);
}

void* OptimizerStates::update_out(ParamGroup& g, MasterShard& s) {
  return params_are_master(s) ? nullptr : g.param_at(s.begin);
}

std::optional<bool> OptimizerStates::update_span(MasterShard& s, const void* grad, void* out,
                                                 const ShardSegment& seg, float* v,
                                                 const optim::AdamWStep& adam, float lr,
                                                 float grad_scale, bool decay) {
  const DType G = config_.precision.grad_dtype, P = config_.precision.param_dtype;
  const int64_t o = seg.shard_offset;
  void* dst = out ? element_at(out, o, P) : nullptr;
  if (uses_adamw(config_.optimizer.kind)) {
    if (on_host()) {  // cpu_device_ops()'s adamw, which checks what it writes
      return optim::cpu_adamw(s.master_ptr + o, element_at(grad, o, G), G, s.m + o, v, seg.length,
                              adam, dst, P);
    }
    ops_.adamw(s.master_ptr + o, element_at(grad, o, G), G, s.m + o, v, seg.length, adam, dst, P);
  } else {
    ops_.sgd(s.master_ptr + o, element_at(grad, o, G), G, s.m ? s.m + o : nullptr, seg.length,
             config_.optimizer.sgd, lr, grad_scale, decay, dst, P);
  }
  return std::nullopt;
}

void OptimizerStates::update(ParamGroup& g, float lr, float grad_scale, int64_t t) {
  MasterShard& s = shards_.at(static_cast<size_t>(g.index()));
  optim::AdamWStep with_decay, without_decay;
  if (uses_adamw(config_.optimizer.kind)) {
    with_decay = optim::make_adamw_step(config_.optimizer.adamw, lr, t, grad_scale, true);
    without_decay = optim::make_adamw_step(config_.optimizer.adamw, lr, t, grad_scale, false);
  }
  const void* grad = update_grad(g, s);
  void* out = update_out(g, s);
  s.nonfinite_param = -1;
  if (muon_) {  // the Muon segments, first: its all-gather is collective over the shard group
    muon_->update(g.index(), {s.master_ptr, s.m, &s.segments, s.begin, s.numel}, grad, out, lr,
                  grad_scale, g.specs());
  }
  for (size_t k = 0; k < s.segments.size(); ++k) {
    const ShardSegment& seg = s.segments[k];
    if (muon_ && muon_->is_muon(g.index(), seg.param)) {
      check_updated(static_cast<size_t>(g.index()), seg, out);
      continue;
    }
    const bool decay = g.specs()[seg.param].weight_decay;
    const optim::AdamWStep& adam = decay ? with_decay : without_decay;
    std::optional<bool> finite;
    if (s.storage.narrow()) {  // the fused kernels (host memory only: device engines refuse)
      finite = adamw_segment(narrow_moments(s), k, s.master_ptr, grad, config_.precision.grad_dtype,
                             out, config_.precision.param_dtype, adam);
    } else {
      finite = update_span(s, grad, out, seg, segment_v(s, k), adam, lr, grad_scale, decay);
    }
    if (!finite) {
      check_updated(static_cast<size_t>(g.index()), seg, out);
    } else if (!*finite && (s.nonfinite_param < 0 || seg.param < s.nonfinite_param)) {
      s.nonfinite_param = seg.param;
    }
  }
  after_update(g, s);
}

void OptimizerStates::check_updated(size_t group, const ShardSegment& seg, const void* out) {
  MasterShard& s = shards_.at(group);
  const DType P = config_.precision.param_dtype;
  // An fp32 copy holds the master's bits; a narrower one can overflow where the master did not.
  const bool check_out = out != nullptr && P != DType::kF32;
  const int64_t o = seg.shard_offset;
  if (!on_host()) {
    const int i = static_cast<int>(check_params_.size());
    check_spans_.push_back({s.master_ptr + o, DType::kF32, seg.length, i});
    check_params_.emplace_back(group, seg.param);
    if (check_out) {
      check_spans_.push_back({element_at(out, o, P), P, seg.length, i + 1});
      check_params_.emplace_back(group, seg.param);
    }
    return;
  }
  // The segment just written, while it is in cache; the first bad parameter in g.specs() order
  // (segments are in layout order).
  if (s.nonfinite_param >= 0 && seg.param >= s.nonfinite_param) return;
  if (optim::first_nonfinite(s.master_ptr + o, DType::kF32, seg.length) >= 0 ||
      (check_out && optim::first_nonfinite(element_at(out, o, P), P, seg.length) >= 0)) {
    s.nonfinite_param = seg.param;
  }
}

void OptimizerStates::updated_nonfinite(std::span<int> first_bad) {
  ZS_ASSERT(first_bad.size() == shards_.size());
  if (!check_spans_.empty()) {  // device states: one pass over every updated span
    std::vector<uint8_t> finite(check_spans_.size());
    ops_.grad_stats(check_spans_, finite);
    for (size_t i = 0; i < finite.size(); ++i) {
      MasterShard& s = shards_.at(check_params_[i].first);
      const int p = check_params_[i].second;
      if (!finite[i] && (s.nonfinite_param < 0 || p < s.nonfinite_param)) s.nonfinite_param = p;
    }
    check_spans_.clear();
    check_params_.clear();
  }
  for (size_t g = 0; g < shards_.size(); ++g) first_bad[g] = shards_[g].nonfinite_param;
}

void OptimizerStates::cast_to_params(ParamGroup& g) {
  MasterShard& s = shards_.at(static_cast<size_t>(g.index()));
  if (params_are_master(s)) return;
  ops_.convert(s.master_ptr, DType::kF32, g.param_at(s.begin), config_.precision.param_dtype,
               s.numel);
}

namespace {

// Muon's compact v (MasterShard::v_offsets) over shard elements [lo, lo + n): into the mirror
// (indexed from lo) or back from it. The Muon segments' elements are not touched.
void copy_compact_v(MasterShard& s, int64_t lo, int64_t n, bool to_mirror) {
  for (size_t k = 0; k < s.segments.size(); ++k) {
    if (s.v_offsets[k] < 0) continue;
    const ShardSegment& seg = s.segments[k];
    const int64_t a = std::max(lo, seg.shard_offset);
    const int64_t b = std::min(lo + n, seg.shard_offset + seg.length);
    if (a >= b) continue;
    float* v = s.v + s.v_offsets[k] + (a - seg.shard_offset);
    float* mirror = s.mirror.data() + (a - lo);
    if (to_mirror) {
      std::copy_n(v, b - a, mirror);
    } else {
      std::copy_n(mirror, b - a, v);
    }
  }
}

}  // namespace

MasterView OptimizerStates::view(size_t group, int64_t lo, int64_t n) {
  MasterShard& s = shards_.at(group);
  ZS_CHECK(lo >= 0 && n >= 0 && lo + n <= s.numel, ErrorCode::kInvalidArgument,
           "state view [{}, {}) of group {}: outside its {} elements", lo, lo + n, group, s.numel);
  s.mirror_lo = lo;
  s.mirror_n = n;
  float* master = s.master_ptr ? s.master_ptr + lo : nullptr;
  if (!s.v_offsets.empty()) {  // Muon's compact v, spread to the state's indexing (zeros between)
    s.mirror.assign(static_cast<size_t>(n), 0.0f);
    copy_compact_v(s, lo, n, /*to_mirror=*/true);
    s.mirror_written = true;
    return {master, s.m ? s.m + lo : nullptr, s.mirror.data(), s.begin + lo, n};
  }
  if (!s.storage.narrow())
    return {master, s.m ? s.m + lo : nullptr, s.v ? s.v + lo : nullptr, s.begin + lo, n};
  s.mirror.assign(2 * static_cast<size_t>(n), 0.0f);
  decode_moments(narrow_moments(s), lo, n, s.mirror.data(), s.mirror.data() + n);
  s.mirror_written = true;
  return {master, s.mirror.data(), s.mirror.data() + n, s.begin + lo, n};
}

int64_t OptimizerStates::view_cut(size_t group, int64_t pos) const {
  const MasterShard& s = shards_.at(group);
  return s.storage.narrow() ? moment_cut(narrow_moments(s), pos) : pos;
}

void OptimizerStates::refresh(size_t group) {
  MasterShard& s = shards_.at(group);
  if (!s.mirror_written) return;
  const int64_t lo = s.mirror_lo, n = s.mirror_n;
  if (!s.v_offsets.empty()) {  // Muon: the mirror's AdamW elements back into the compact v
    copy_compact_v(s, lo, n, /*to_mirror=*/false);
    s.mirror_written = false;
    return;
  }
  if (!s.storage.narrow()) return;
  encode_moments(narrow_moments(s), lo, n, s.mirror.data(), s.mirror.data() + n);
  s.mirror_written = false;
}

void OptimizerStates::release_view(size_t group) {
  MasterShard& s = shards_.at(group);
  s.mirror_written = false;
  std::vector<float>().swap(s.mirror);
}

void OptimizerStates::invalidate_views() {
  for (MasterShard& s : shards_) s.mirror_written = false;
}

}  // namespace zs
