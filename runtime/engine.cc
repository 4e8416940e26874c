#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <xxhash.h>

#include "collectives/flight_recorder.h"
#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "offload/host_arena.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/cpu_adam.h"
#include "optim/loss_scaler.h"
#include "optim/sgd.h"
#include "runtime/agreement.h"
#include "runtime/buffer_plan.h"
#include "runtime/gather_schedule.h"
#include "runtime/host_staging.h"
#include "runtime/invariant_stats.h"
#include "runtime/optimizer_states.h"
#include "runtime/param_group.h"
#include "runtime/param_init.h"
#include "runtime/reduce_schedule.h"
#include "runtime/tie_book.h"
#include "runtime/tied_params.h"
#include "sharding/sharding_policy.h"

namespace zs {

struct Engine::Impl {
  Impl(Model& m, Communicator& c, const EngineConfig& cfg, MemoryTracker* t, DeviceOps& o)
      : model(m), comm(c), config(cfg), scaler(cfg.loss_scale), tracker(t), ops(o) {}

  Model& model;
  Communicator& comm;
  const EngineConfig& config;
  optim::LossScaler scaler;
  MemoryTracker* tracker;
  DeviceOps& ops;
  ShardingPolicy policy;  // what the stage keeps resident and when it communicates
  int rank = 0;           // in `comm` (the job)
  int world = 1;
  // [Note: hybrid sharding] in engine_config.h. Without it `shard` is `comm` and there are no
  // replicas; the layouts, plan and states are always those of the shard group.
  std::unique_ptr<Communicator> shard_owned, replica_comm;
  // ZeRO++ ([Note: node layout] in engine_config.h): qgZ's node-local and cross-node
  // communicators and hpZ's secondary-shard group; null when off.
  std::unique_ptr<Communicator> node_local, cross_node, hpz;
  Communicator* shard = nullptr;
  int shard_rank = 0;
  int shard_size = 1;
  int replica_index = 0;  // which shard group this rank is in
  int skip_limit = 0;     // [Note: non-finite policy] in engine_config.h
  int consecutive_skips = 0;

  BufferPlan plan;
  // Host bytes through the communicator: the control collectives and state gathers.
  std::unique_ptr<HostStaging> staging;
  // Declared before the groups, so destroyed after them: a gather still in flight when an error
  // unwinds the engine is waited for by the group's destructor while its slot still exists.
  Buffer convert_buf;  // frozen parameters converted into the compute dtype, one unit at a time
  std::unique_ptr<GatherSchedule> gathers;
  std::unique_ptr<OptimizerStates> states;  // where master and optimizer state live
  std::vector<ParamGroup> groups;
  // Declared after the groups, so destroyed before them: it waits for the reductions in flight.
  std::unique_ptr<ReduceSchedule> reductions;
  std::vector<WorkHandle> works;        // gathers into the groups' buffers: destroyed before them
  std::vector<ParamGroup*> step_order;  // per micro-batch: forward 0..U-1, backward U-1..0
  std::vector<ParamGroup*> eval_order;  // forward only: 0..U-1
  std::vector<double> reduce_vec;       // [loss sum, sum of squares, non-finite flag per unit]
  // [Note: world-invariant reduction]: the loss's exact sum, the gradient's chunks, the words.
  ExactSum loss_exact;
  std::vector<StatsChunk> stats_chunks;
  std::vector<double> invariant_vec;
  std::vector<DeviceOps::StatsSpan> stats_spans;
  std::vector<uint8_t> finite_flags;
  // [Note: non-finite policy]: per unit, the first parameter the update made non-finite (-1: none);
  // one flag per trainable parameter (unit u's at update_first[u]; padded to a multiple of the
  // ranks), summed over the ranks.
  std::vector<int> update_bad;
  std::vector<size_t> update_first;
  std::vector<double> update_vec;
  // [Note: tied parameters] in unit/unit.h: the ties and their buffers during a step, and the
  // owners' own conversion buffers (the plan's own_convert_bytes).
  TieBook ties;
  std::vector<Buffer> own_convert;
  // Each unit's trainable parameters as "unit.param", in layout order (OptimizerConfig::state_fp32
  // matches these names).
  std::vector<std::vector<std::string>> param_names;
  // [Note: Muon parameters]: each unit's Muon matrices (empty unless the optimizer is Muon).
  MuonMatrices muon;
  // frozen_hash()'s last value; a set_frozen_param* call on this rank clears it (the frozen bytes
  // change nowhere else). Whether to use it is agreed by all ranks.
  std::optional<uint64_t> frozen_hash_cache;

  // Construction.
  void build(const std::vector<GroupLayout>& layouts, const std::vector<FrozenLayout>& frozen,
             std::vector<std::vector<ParamSpec>> specs);
  void check_agreement(const std::vector<GroupLayout>& layouts,
                       const std::vector<FrozenLayout>& frozen);
  void make_shard_groups();
  void make_node_groups();
  void make_groups(const std::vector<GroupLayout>& layouts, const std::vector<FrozenLayout>& frozen,
                   std::vector<std::vector<ParamSpec>> specs);
  void make_schedules();
  void init_parameters();

  // The step's phases, in order (docs/engine.md, "One step").
  StepStats step(int64_t t);
  void forward(int micro, const StepInfo& info);
  void backward(int micro, const StepInfo& info);
  void finish_reductions();
  void gather_reduced_grads();
  StepStats gradient_stats(double loss_sum, float scale);
  StepStats invariant_gradient_stats(float scale);
  void name_nonfinite(const double* flags, StepStats& stats) const;
  void apply_nonfinite_policy(StepStats& stats, int64_t t);
  void update(float lr, float grad_scale, int64_t t);
  void check_update(int64_t t);
  void wait_all();

  void compute_gradient(ParamGroup& g, const StepInfo& info);
  std::span<const ParamView> acquire(ParamGroup& g);
  void check_produced(ParamGroup& g, const GradViews& gv) const;
  void forward_eval();
};

// ---------------------------------------------------------------------------------------------
// Construction

namespace {

// The features only the CPU backend implements, refused on a device: int8 frozen storage, narrow
// optimizer states and the ZeRO++ and world-invariant paths.
void check_backend_support(const EngineConfig& c, DType storage, DeviceOps& ops) {
  ZS_CHECK(storage != DType::kI8 || ops.host_accessible(), ErrorCode::kUnsupported,
           "int8 storage of frozen parameters is implemented on the CPU backend only, not on {}",
           ops.device().to_string());
  ZS_CHECK(c.optimizer.state_dtype == optim::StateDType::kF32 || ops.host_accessible(),
           ErrorCode::kUnsupported,
           "optimizer.state_dtype {}: bf16 and int8 optimizer states are implemented on the CPU "
           "backend only (resident or offloaded), not on {}",
           optim::state_dtype_name(c.optimizer.state_dtype), ops.device().to_string());
  ZS_CHECK(!c.zeropp.quantized_weights || ops.host_accessible(), ErrorCode::kUnsupported,
           "zero_quantized_weights (qwZ) is implemented on the CPU backend only, not on {}",
           ops.device().to_string());
  ZS_CHECK(c.optimizer.kind != OptimizerKind::kMuon || ops.host_accessible(),
           ErrorCode::kUnsupported,
           "optimizer muon is implemented on the CPU backend only, not on {} (use adamw there)",
           ops.device().to_string());
  ZS_CHECK(!c.world_invariant || ops.host_accessible(), ErrorCode::kUnsupported,
           "world_invariant is implemented on the CPU backend only, not on {}",
           ops.device().to_string());
  ZS_CHECK(
      (c.zeropp.hpz_partition_size == 1 && !c.zeropp.quantized_gradients) || ops.host_accessible(),
      ErrorCode::kUnsupported, "{} is implemented on the CPU backend only, not on {}",
      c.zeropp.quantized_gradients ? "zero_quantized_gradients (qgZ)"
                                   : "zero_hpz_partition_size (hpZ)",
      ops.device().to_string());
}

}  // namespace

Engine::Engine(Model& model, Communicator& comm, const EngineConfig& config, MemoryTracker* tracker,
               DeviceOps* ops)
    : config_(config), tracker_(tracker ? tracker : &MemoryTracker::process()) {
  config_.validate();
  if (!config_.loss_scale_set) {
    config_.loss_scale = optim::LossScalerConfig{};
    config_.loss_scale.dynamic = config_.precision.param_dtype == DType::kF16;
    if (!config_.loss_scale.dynamic) config_.loss_scale.initial = 1.0f;
  }
  impl_ = std::make_unique<Impl>(model, comm, config_, tracker_, ops ? *ops : cpu_device_ops());
  if (!impl_->ops.host_accessible()) {
    // Device libraries (cuBLASLt, vectorized kernels) want 16-byte aligned operands: every view
    // starts at a multiple of `align` elements of the parameter and the gradient dtypes.
    const DType p = config_.precision.param_dtype, g = config_.precision.grad_dtype;
    const DType narrow = dtype_size(p) <= dtype_size(g) ? p : g;
    const int64_t need = 16 / static_cast<int64_t>(dtype_size(narrow));
    ZS_CHECK(config_.align % need == 0, ErrorCode::kInvalidArgument,
             "alignment of {} elements puts {} views off 16-byte boundaries on {}: use a multiple "
             "of {} elements",
             config_.align, dtype_name(narrow), impl_->ops.device().to_string(), need);
  }
  const size_t U = model.num_units();
  ZS_CHECK(U > 0, ErrorCode::kInvalidArgument, "the model has no units");
  const DType compute = config_.precision.param_dtype;
  const DType storage = config_.frozen.storage_or(compute);
  // The layouts span one shard group; a size that does not divide the world is refused after the
  // ranks have agreed on it (make_shard_groups), so lay out over the world until then.
  const int S = config_.shard_group_size;
  const int group = S > 0 && S <= comm.size() && comm.size() % S == 0 ? S : comm.size();
  std::vector<std::vector<ParamSpec>> specs(U);
  std::vector<GroupLayout> layouts;
  std::vector<FrozenLayout> frozen;
  bool any_trainable = false;
  impl_->param_names.resize(U);
  std::vector<std::string> unit_names(U);
  std::vector<std::vector<std::vector<int64_t>>> shapes(U);
  for (size_t u = 0; u < U; ++u) {
    Unit& unit = model.unit(u);
    specs[u] = unit.param_specs();
    ZS_CHECK(!specs[u].empty(), ErrorCode::kInvalidArgument,
             "unit {} ('{}') declares no parameters: every unit needs at least one", u,
             unit.name());
    std::vector<int64_t> numels;
    std::vector<FrozenParamDesc> frozen_descs;
    for (const ParamSpec& p : specs[u]) {
      ZS_CHECK(p.numel() >= 1, ErrorCode::kInvalidArgument,
               "unit {} ('{}') parameter '{}' has {} elements", u, unit.name(), p.name, p.numel());
      if (p.tied()) continue;  // the owner's ([Note: tied parameters])
      if (p.trainable) {
        numels.push_back(p.numel());
        impl_->param_names[u].push_back(unit.name() + "." + p.name);
        shapes[u].push_back(p.shape);
      } else {
        frozen_descs.push_back(frozen_param_desc(p));
      }
    }
    unit_names[u] = unit.name();
    any_trainable = any_trainable || !numels.empty();
    layouts.push_back(compute_group_layout(numels, group, layout_align(config_)));
    frozen.push_back(
        compute_frozen_layout(frozen_descs, storage, compute, group, config_.frozen.hands_int8()));
  }
  ZS_CHECK(any_trainable, ErrorCode::kInvalidArgument,
           "every parameter of the model is frozen: there is nothing to train");
  impl_->ties =
      TieBook(resolve_tied_params(specs, [&model](size_t u) { return model.unit(u).name(); }));
  impl_->muon = muon_matrices(config_.optimizer, unit_names, shapes);
  check_backend_support(config_, storage, impl_->ops);
  impl_->build(layouts, frozen, std::move(specs));
}

Engine::~Engine() {
  if (!impl_) return;
  // A destructor cannot report: errors are dropped. Device work still in flight (the last
  // step's update, uploads and collectives) must finish before the buffers go back to their
  // allocator and the staging arena is freed.
  try {
    impl_->gathers->finish();
    impl_->ops.synchronize();
  } catch (...) {
  }
}

// Named: the configuration's every field and the model's every parameter size, compared on
// every backend (a device communicator through the staging seam).
void Engine::Impl::check_agreement(const std::vector<GroupLayout>& layouts,
                                   const std::vector<FrozenLayout>& frozen) {
  std::vector<Setting> s = engine_settings(config);
  for (size_t u = 0; u < layouts.size(); ++u) {
    for (size_t p = 0; p < layouts[u].params.size(); ++p) {
      s.push_back({fmt::format("unit {} parameter {} size", u, p),
                   std::to_string(layouts[u].params[p].numel)});
    }
    for (size_t f = 0; f < frozen[u].records.size(); ++f) {
      s.push_back({fmt::format("unit {} frozen parameter {} bytes", u, f),
                   std::to_string(frozen[u].records[f].bytes)});
    }
  }
  for (const TiedParam& t : ties.ties()) {
    s.push_back({fmt::format("unit {} parameter {} tied to", t.unit, t.spec),
                 fmt::format("unit {} parameter {}", t.owner_unit, t.owner_spec)});
  }
  zs::check_agreement(comm, *staging, s, "engine");
}

void Engine::Impl::build(const std::vector<GroupLayout>& layouts,
                         const std::vector<FrozenLayout>& frozen,
                         std::vector<std::vector<ParamSpec>> specs) {
  rank = comm.rank();
  world = comm.size();
  shard_size = layouts.front().world;
  shard_rank = rank % shard_size;
  replica_index = rank / shard_size;
  policy = ShardingPolicy::for_stage(static_cast<int>(config.stage));
  skip_limit = config.max_consecutive_skips >= 0 ? config.max_consecutive_skips
                                                 : (config.loss_scale.dynamic ? 16 : 0);
  const DType G = config.precision.grad_dtype;
  if (config.optimizer_threads > 0) optim::set_cpu_adam_threads(config.optimizer_threads);
  plan = plan_engine_buffers(layouts, frozen, config, shard_rank,
                             /*on_device=*/!ops.host_accessible(), world, ties.ties(), param_names,
                             muon);
  Buffer ctrl;  // device engines: the planned staging buffer for host-side collectives
  if (plan.ctrl_bytes > 0) {
    ctrl = Buffer(static_cast<size_t>(plan.ctrl_bytes), MemCategory::kCommBuffers, tracker,
                  &ops.allocator());
  }
  staging = std::make_unique<HostStaging>(ops, std::move(ctrl), tracker);
  check_agreement(layouts, frozen);  // before the large allocations
  make_shard_groups();
  make_node_groups();
  states = OptimizerStates::create(config, plan, ops, tracker, shard_rank, shard);
  make_groups(layouts, frozen, std::move(specs));
  make_schedules();
  const size_t U = layouts.size();
  works.reserve(2 * U);
  reduce_vec.assign(2 + U, 0.0);
  finite_flags.assign(U, 1);
  update_bad.assign(U, -1);
  size_t params = 0;
  for (ParamGroup& g : groups) {
    update_first.push_back(params);
    params += g.specs().size();
  }
  // Padded to whole pieces per rank, as the all-reduce sends them (and its byte counters count).
  const size_t W = static_cast<size_t>(world);
  update_vec.assign(params == 0 ? 0 : (params + W - 1) / W * W, 0.0);
  for (ParamGroup& g : groups) {
    if (config.world_invariant) {
      append_stats_chunks(g.layout(), shard_rank, static_cast<const float*>(g.grad_shard()),
                          g.index(), stats_chunks);
    }
    const char* shard = static_cast<const char*>(g.grad_shard());
    for (const ShardSegment& seg : g.layout().shard_segments(shard_rank)) {
      stats_spans.push_back({shard + seg.shard_offset * static_cast<int64_t>(dtype_size(G)), G,
                             seg.length, g.index()});
    }
  }
  init_parameters();
}

// One ParamGroup per unit, its buffers from the plan, attached to the optimizer states.
void Engine::Impl::make_groups(const std::vector<GroupLayout>& layouts,
                               const std::vector<FrozenLayout>& frozen,
                               std::vector<std::vector<ParamSpec>> specs) {
  const DType P = config.precision.param_dtype, G = config.precision.grad_dtype;
  Allocator* dev = &ops.allocator();
  if (plan.convert_bytes > 0) {
    convert_buf =
        Buffer(static_cast<size_t>(plan.convert_bytes), MemCategory::kCommBuffers, tracker, dev);
  }
  groups.reserve(layouts.size());
  own_convert.resize(layouts.size());
  const PathConfig path_cfg = path_config(config, shard_size < world);
  const PathComms comms{shard, hpz.get(), node_local.get(), cross_node.get()};
  for (size_t i = 0; i < layouts.size(); ++i) {
    const UnitBufferPlan& up = plan.units[i];
    void* convert = convert_buf.data();
    if (up.own_convert_bytes > 0) {  // an owner of a tie: its converted values outlive its visit
      own_convert[i] = Buffer(static_cast<size_t>(up.own_convert_bytes), MemCategory::kCommBuffers,
                              tracker, dev);
      convert = own_convert[i].data();
    }
    Buffer grads(up.grads_bytes, MemCategory::kGrads, tracker, dev);
    // [Note: communication paths]: the group's gather and reduce paths, as the plan sized them.
    GroupPaths paths{make_gather_path(path_cfg, layouts[i], frozen[i], shard_rank),
                     make_reduce_path(path_cfg, layouts[i], shard_rank)};
    paths.gather->connect(comms, Buffer(static_cast<size_t>(up.gather_kept_bytes),
                                        MemCategory::kParams, tracker, dev));
    paths.reduce->connect(
        comms, grads.data(), ops,
        Buffer(static_cast<size_t>(up.reduce_kept_bytes), MemCategory::kGrads, tracker, dev));
    groups.emplace_back(
        static_cast<int>(i), model.unit(i).name(), std::move(specs[i]), layouts[i], frozen[i],
        policy, P, G, shard_rank, Buffer(up.params_bytes, MemCategory::kParams, tracker, dev),
        std::move(grads), Buffer(up.frozen_bytes, MemCategory::kFrozen, tracker, dev), convert,
        *shard, ops, std::move(paths));
    states->attach(groups[i], up, muon.empty() ? std::vector<MuonMatrix>{} : muon[i]);
  }
  ties.connect(groups, ops, tracker);
}

// The two schedules of a step: reductions (lanes, replica stage) and gathers (slots, prefetch),
// and the visit orders the gathers follow.
void Engine::Impl::make_schedules() {
  ReduceSchedule::Config rc;
  rc.plan = &plan;
  rc.two_lanes = plan.lanes == 2;
  rc.micro_batches = config.micro_batches;
  rc.groups = groups;
  rc.replicas = replica_comm.get();
  rc.ops = &ops;
  rc.tracker = tracker;
  rc.on_final = [this](ParamGroup& g) { states->gradient_final(g); };
  reductions = std::make_unique<ReduceSchedule>(std::move(rc));
  gathers = std::make_unique<GatherSchedule>(plan.gather_count, plan.gather_bytes, config.prefetch,
                                             tracker, &ops.allocator());
  if (policy.shard_params) {
    std::vector<char> held(groups.size(), 0);
    for (int o : tied_owner_units(ties.ties())) held[static_cast<size_t>(o)] = 1;
    gathers->hold(std::move(held));
  }
  for (int m = 0; m < config.micro_batches; ++m) {
    for (ParamGroup& g : groups) step_order.push_back(&g);
    for (size_t i = groups.size(); i-- > 0;) step_order.push_back(&groups[i]);
  }
  for (ParamGroup& g : groups) eval_order.push_back(&g);
}

// [Note: hybrid sharding] in engine_config.h: the shard group's communicator (ranks
// [S*g, S*g + S)) and the replica group's (ranks with the same rank mod S), split from `comm` once
// every rank is known to have the same shard_group_size.
void Engine::Impl::make_shard_groups() {
  ZS_CHECK(config.shard_group_size <= world && world % std::max(config.shard_group_size, 1) == 0,
           ErrorCode::kInvalidArgument,
           "shard group size {} does not divide the {} ranks: hybrid sharding needs whole shard "
           "groups (0 = all ranks)",
           config.shard_group_size, world);
  if (shard_size == world) {
    shard = &comm;
    return;
  }
  shard_owned = comm.split(replica_index, rank);
  replica_comm = comm.split(shard_rank, rank);
  ZS_ASSERT(shard_owned && shard_owned->size() == shard_size && shard_owned->rank() == shard_rank);
  ZS_ASSERT(replica_comm && replica_comm->size() == world / shard_size &&
            replica_comm->rank() == replica_index);
  shard = shard_owned.get();
}

// [Note: node layout] in engine_config.h: with block placement the ranks of node k are
// [L*k, L*k + L); qgZ reduces over the node's ranks and then over the ranks with the same local
// rank, hpZ gathers over groups of K consecutive ranks. Split once every rank agrees.
void Engine::Impl::make_node_groups() {
  config.validate_for_world(world);
  const int L = config.node_size > 0 ? config.node_size : world;
  if (config.zeropp.quantized_gradients) {
    node_local = comm.split(rank / L, rank);
    cross_node = comm.split(rank % L, rank);
    ZS_ASSERT(node_local->size() == L && cross_node->size() == world / L);
  }
  if (const int K = config.zeropp.hpz_partition_size; K > 1) {
    hpz = comm.split(rank / K, rank);
    ZS_ASSERT(hpz->size() == K && hpz->rank() == rank % K);
  }
}

void Engine::Impl::init_parameters() {
  const DType P = config.precision.param_dtype;
  std::vector<float> tmp;
  std::vector<char> host_param;
  const int threads = config.optimizer_threads;  // 0: the OpenMP default
  for (ParamGroup& g : groups) {
    // Frozen parameters: only the values this rank's bytes depend on ([Note: vector draws] in
    // runtime/param_init.h), drawn and encoded a piece at a time.
    for (size_t f = 0; config.frozen.draw_initial && f < g.frozen_specs().size(); ++f) {
      const Init init = g.frozen_specs()[f].init;
      const auto unit = static_cast<uint32_t>(g.index());
      const auto param = static_cast<uint32_t>(g.frozen_spec_index(f));
      g.set_frozen_collective(
          f,
          [&](int64_t first, int64_t n, float* out) {
            init_param_values(init, config.seed, unit, param, first, n, out);
          },
          threads);
    }
    states->initialize(g, config.seed, threads);
    if (!policy.gather_updated_params()) {
      states->cast_to_params(g);
      continue;
    }
    // A replica updated by regions: every rank computes all of it (no communication).
    for (size_t p = 0; p < g.specs().size(); ++p) {
      const ParamSlot& slot = g.layout().params[p];
      const size_t n = static_cast<size_t>(slot.numel);
      tmp.resize(n);
      init_param_values(g.specs()[p].init, config.seed, static_cast<uint32_t>(g.index()),
                        static_cast<uint32_t>(g.spec_index(p)), 0, slot.numel, tmp.data(), threads);
      void* dst = g.param_at(slot.offset);
      if (ops.host_accessible()) {
        convert(tmp.data(), DType::kF32, dst, P, n);
      } else {
        host_param.resize(n * dtype_size(P));
        convert(tmp.data(), DType::kF32, host_param.data(), P, n);
        ops.copy_from_host(dst, host_param.data(), host_param.size());
      }
    }
  }
  ops.synchronize();
}

// ---------------------------------------------------------------------------------------------
// One step: forward, backward (each unit's reduction started as its gradient is done), finish
// the reductions, finite check and norm, clip, update (which casts), re-gather the replicas.

StepStats Engine::Impl::step(int64_t t) {
  states->invalidate_views();  // shard_state() host copies taken before this step are stale
  for (ParamGroup& g : groups) g.begin_step();
  gathers->begin(step_order);
  const float scale = scaler.scale();
  const int k = config.micro_batches;
  double loss_sum = 0.0;
  loss_exact = ExactSum();
  for (int m = 0; m < k; ++m) {
    model.load_micro_batch(m);
    const StepInfo info{m, k, scale, true};
    forward(m, info);
    backward(m, info);
    // Read after the backward was issued: a device model's loss() waits for the forward only,
    // while the backward already queued keeps the device busy.
    const double loss = model.loss();
    loss_sum += loss;
    if (config.world_invariant) loss_exact.add(loss);
  }
  finish_reductions();
  gathers->finish();
  gather_reduced_grads();
  StepStats stats = gradient_stats(loss_sum, scale);
  apply_nonfinite_policy(stats, t);
  const bool apply = scaler.update(stats.skipped);
  stats.lr = config.optimizer.schedule.at(t);
  if (!apply) {
    stats.step = t - 1;
    return stats;
  }
  const double inv = 1.0 / (static_cast<double>(scale) * world * k);
  const float clip = optim::clip_factor(stats.grad_norm, config.clip_norm);
  update(stats.lr, static_cast<float>(inv) * clip, t);
  check_update(t);
  stats.step = t;
  return stats;
}

void Engine::Impl::forward(int /*micro*/, const StepInfo& info) {
  for (ParamGroup& g : groups) {
    model.unit(static_cast<size_t>(g.index())).forward(acquire(g), info);
    gathers->release(g);
  }
}

// g's views, its tied parameters pointing at their owners' values (the owners come earlier and
// are still acquired: resident, or held by the gather schedule).
std::span<const ParamView> Engine::Impl::acquire(ParamGroup& g) {
  std::span<const ParamView> views = gathers->acquire(g);
  ties.acquired(g, views);
  return views;
}

// Reverse order: each unit's gradient, then its reduction (ReduceSchedule: started here,
// finished when its lane is needed again or after the last unit).
void Engine::Impl::backward(int micro, const StepInfo& info) {
  ties.begin_backward();
  for (size_t j = groups.size(); j-- > 0;) {
    compute_gradient(groups[j], info);
    reductions->start(groups[j], micro, config.micro_batches);
  }
}

void Engine::Impl::compute_gradient(ParamGroup& g, const StepInfo& info) {
  GradViews& gv = reductions->acquire(g);
  ties.seed_owner(g, reductions->acquired_scratch());
  model.unit(static_cast<size_t>(g.index())).backward(acquire(g), gv, info);
  gathers->release(g);
  check_produced(g, gv);
}

void Engine::Impl::check_produced(ParamGroup& g, const GradViews& gv) const {
  for (size_t p = 0; p < g.specs().size(); ++p) {
    ZS_CHECK(gv.produced(static_cast<size_t>(g.spec_index(p))), ErrorCode::kInvalidArgument,
             "unit {} ('{}'): backward did not produce the gradient of parameter '{}'", g.index(),
             g.name(), g.specs()[p].name);
  }
  for (size_t t = 0; t < g.tied_specs().size(); ++t) {
    ZS_CHECK(g.tied_grad(t) == nullptr || gv.produced(static_cast<size_t>(g.tied_spec_index(t))),
             ErrorCode::kInvalidArgument,
             "unit {} ('{}'): backward did not produce the gradient of tied parameter '{}'",
             g.index(), g.name(), g.tied_specs()[t].name);
  }
}

void Engine::Impl::finish_reductions() { reductions->finish_all(); }

// Stage 0: every rank needs the whole reduced gradient; all-gather it in place.
void Engine::Impl::gather_reduced_grads() {
  for (ParamGroup& g : groups) {
    if (WorkHandle w = g.start_gather_reduced_grads()) works.push_back(std::move(w));
  }
  wait_all();
}

// The finite check and the global norm: one all-reduce of the loss, the sum of squares of this
// rank's gradient shards and one non-finite flag per unit.
StepStats Engine::Impl::gradient_stats(double loss_sum, float scale) {
  if (config.world_invariant) return invariant_gradient_stats(scale);
  const size_t U = groups.size();
  const int k = config.micro_batches;
  reduce_vec[0] = loss_sum;
  reduce_vec[1] = ops.grad_stats(stats_spans, finite_flags);
  if (replica_index != 0) reduce_vec[1] = 0.0;  // each shard's squares counted once
  // The staged gradient shards are complete (and the next step may write the device shards).
  states->wait_gradients();
  for (size_t i = 0; i < U; ++i) reduce_vec[2 + i] = finite_flags[i] ? 0.0 : 1.0;
  set_flight_tag("step stats");
  staging->all_reduce(comm, reduce_vec.data(), reduce_vec.size(), DType::kF64, ReduceOp::kSum);
  StepStats stats;
  stats.loss = reduce_vec[0] / (static_cast<double>(k) * world);
  stats.loss_scale = scale;
  stats.grad_norm = std::sqrt(reduce_vec[1]) / (static_cast<double>(scale) * world * k);
  name_nonfinite(reduce_vec.data() + 2, stats);
  return stats;
}

// Named in backward order: the first unit whose gradient went bad is where it started.
void Engine::Impl::name_nonfinite(const double* flags, StepStats& stats) const {
  for (size_t i = groups.size(); i-- > 0;) {
    if (flags[i] > 0.0) {
      stats.skipped = true;
      stats.nonfinite_unit = groups[i].name();
      return;
    }
  }
}

// [Note: world-invariant reduction]: the loss and the sum of squares as exact sums, exchanged
// as their words (exact integers in fp64, so the all-reduce's order cannot matter).
StepStats Engine::Impl::invariant_gradient_stats(float scale) {
  const size_t U = groups.size();
  const double M = static_cast<double>(config.micro_batches) * world;
  std::fill(finite_flags.begin(), finite_flags.end(), uint8_t{1});
  ExactSum squares;
  if (replica_index == 0) add_sum_of_squares(stats_chunks, squares, finite_flags);
  constexpr size_t W = ExactSum::kWords;
  std::vector<double>& v = invariant_vec;
  v.assign(2 * W + U, 0.0);
  loss_exact.to_words(v.data());
  squares.to_words(v.data() + W);
  for (size_t i = 0; i < U; ++i) v[2 * W + i] = finite_flags[i] ? 0.0 : 1.0;
  set_flight_tag("step stats");
  staging->all_reduce(comm, v.data(), v.size(), DType::kF64, ReduceOp::kSum);
  StepStats stats;
  stats.loss = ExactSum::from_words(v.data()).to_double() / M;
  stats.loss_scale = scale;
  stats.grad_norm =
      std::sqrt(ExactSum::from_words(v.data() + W).to_double()) / (static_cast<double>(scale) * M);
  name_nonfinite(v.data() + 2 * W, stats);
  return stats;
}

// [Note: non-finite policy] in engine_config.h. The values are the same on every rank (they come
// from the all-reduce), so every rank throws the same error at the same step.
void Engine::Impl::apply_nonfinite_policy(StepStats& stats, int64_t t) {
  if (!std::isfinite(stats.loss)) {
    fail(ErrorCode::kNonFinite,
         "step {}: the loss is not finite ({}): the parameters or the inputs went bad; stopping "
         "with the parameters of step {}",
         t, stats.loss, t - 1);
  }
  consecutive_skips = stats.skipped ? consecutive_skips + 1 : 0;
  stats.consecutive_skips = consecutive_skips;
  if (consecutive_skips <= skip_limit) return;
  fail(ErrorCode::kNonFinite,
       "step {}: the gradient of unit '{}' is not finite ({} consecutive step(s) skipped, more "
       "than max_consecutive_skips = {}{}); stopping with the parameters of step {}",
       t, stats.nonfinite_unit, consecutive_skips, skip_limit,
       config.loss_scale.dynamic ? fmt::format(", loss scale {}", stats.loss_scale)
                                 : std::string(", no dynamic loss scaling to absorb it"),
       t - 1);
}

// The optimizer step of every group (writing the compute-dtype cast of its region), then the
// re-gather of the replicas that were updated by regions: each group's all-gather starts as soon
// as its update is issued, so it overlaps the updates of the groups after it.
void Engine::Impl::update(float lr, float grad_scale, int64_t t) {
  for (ParamGroup& g : groups) {
    states->update(g, lr, grad_scale, t);
    if (WorkHandle w = g.start_gather_updated_params()) works.push_back(std::move(w));
  }
  wait_all();
}

// [Note: non-finite policy] in engine_config.h: an update that made a value non-finite (a finite
// but absurd optimizer state, a learning rate or gradient that overflows the step) cannot be
// skipped, its shard is overwritten: every rank stops, naming the first such parameter in model
// order. One all-reduce of a flag per parameter: the step's statistics cannot carry them, the
// update needs their result before it starts, and the next step's would leave the last step (and
// what a trainer does between steps) unchecked.
void Engine::Impl::check_update(int64_t t) {
  states->updated_nonfinite(update_bad);
  if (update_vec.empty()) return;  // nothing trainable (the same on every rank)
  std::fill(update_vec.begin(), update_vec.end(), 0.0);
  for (size_t u = 0; u < groups.size(); ++u) {
    if (update_bad[u] >= 0) update_vec[update_first[u] + static_cast<size_t>(update_bad[u])] = 1.0;
  }
  set_flight_tag("update check");
  staging->all_reduce(comm, update_vec.data(), update_vec.size(), DType::kF64, ReduceOp::kSum);
  for (size_t u = 0; u < groups.size(); ++u) {
    const ParamGroup& g = groups[u];
    for (size_t p = 0; p < g.specs().size(); ++p) {
      if (update_vec[update_first[u] + p] == 0.0) continue;
      fail(ErrorCode::kNonFinite,
           "step {}: the update made parameter '{}' of unit '{}' not finite (an optimizer state, "
           "the learning rate or the gradient out of range); the parameters in memory are lost: "
           "stopping (resume from a checkpoint)",
           t, g.specs()[p].name, g.name());
    }
  }
}

void Engine::Impl::wait_all() {
  for (WorkHandle& w : works) w->wait();
  works.clear();
}

void Engine::Impl::forward_eval() {
  gathers->begin(eval_order);
  const StepInfo info{0, 1, 1.0f, false};
  for (ParamGroup& g : groups) {
    model.unit(static_cast<size_t>(g.index())).forward(acquire(g), info);
    gathers->release(g);
  }
  gathers->finish();
}

// ---------------------------------------------------------------------------------------------
// Public methods

StepStats Engine::step() {
  StepStats s = impl_->step(step_ + 1);
  step_ = s.step;
  return s;
}

void Engine::forward() { impl_->forward_eval(); }

size_t Engine::num_units() const { return impl_->groups.size(); }
const GroupLayout& Engine::layout(size_t u) const { return impl_->groups.at(u).layout(); }
const std::vector<ParamSpec>& Engine::param_specs(size_t u) const {
  return impl_->groups.at(u).specs();
}
const std::vector<ParamSpec>& Engine::frozen_specs(size_t u) const {
  return impl_->groups.at(u).frozen_specs();
}
const FrozenLayout& Engine::frozen_layout(size_t u) const {
  return impl_->groups.at(u).frozen_layout();
}
int64_t Engine::num_frozen_params() const {
  int64_t n = 0;
  for (const ParamGroup& g : impl_->groups) n += g.frozen_layout().numel();
  return n;
}

const std::string& Engine::unit_name(size_t u) const { return impl_->groups.at(u).name(); }

int Engine::shard_group_size() const { return impl_->shard_size; }
int Engine::shard_group_rank() const { return impl_->shard_rank; }
int Engine::replica_index() const { return impl_->replica_index; }
Communicator& Engine::shard_communicator() { return *impl_->shard; }
Communicator* Engine::replica_communicator() { return impl_->replica_comm.get(); }
Communicator* Engine::node_local_communicator() { return impl_->node_local.get(); }
Communicator* Engine::cross_node_communicator() { return impl_->cross_node.get(); }
Communicator* Engine::hpz_communicator() { return impl_->hpz.get(); }

int64_t Engine::num_params() const {
  int64_t n = 0;
  for (const ParamGroup& g : impl_->groups) n += g.layout().numel;
  return n;
}
int64_t Engine::num_padded_params() const {
  int64_t n = 0;
  for (const ParamGroup& g : impl_->groups) n += g.layout().padded_numel;
  return n;
}
int64_t Engine::padding_bytes() const { return impl_->plan.padding_bytes(); }
int64_t Engine::planned_bytes(MemCategory c) const { return impl_->plan.bytes(c); }

optim::LossScalerState Engine::loss_scaler_state() const { return impl_->scaler.state(); }
void Engine::restore_loss_scaler(const optim::LossScalerState& st) { impl_->scaler.restore(st); }

UnitShardState Engine::shard_state(size_t ui) {
  const MasterView v = impl_->states->view(ui);
  return {v.master, v.exp_avg, v.exp_avg_sq, v.begin, v.numel};
}

UnitShardState Engine::shard_state(size_t ui, ShardExtent piece) {
  const MasterShard& s = impl_->states->shard(ui);
  const MasterView v = impl_->states->view(ui, piece.begin - s.begin, piece.numel);
  return {v.master, v.exp_avg, v.exp_avg_sq, v.begin, v.numel};
}

std::vector<ShardExtent> Engine::shard_pieces(size_t ui, int64_t max_numel) {
  const OptimizerStates& states = *impl_->states;
  const MasterShard& s = impl_->states->shard(ui);
  max_numel = std::max<int64_t>({max_numel, s.storage.block, 1});
  std::vector<ShardExtent> out;
  for (int64_t lo = 0; lo < s.numel;) {
    int64_t hi = std::min(s.numel, lo + max_numel);
    if (hi < s.numel) hi = states.view_cut(ui, hi);
    ZS_ASSERT(hi > lo);
    out.push_back({s.begin + lo, hi - lo});
    lo = hi;
  }
  return out;
}

ShardExtent Engine::shard_extent(size_t ui) {
  const MasterShard& s = impl_->states->shard(ui);
  return {s.begin, s.numel};
}

void Engine::release_shard_state(size_t ui, bool written) {
  OptimizerStates& states = *impl_->states;
  if (written) states.refresh(ui);
  states.release_view(ui);
}

void Engine::check_master_finite(std::string_view what) {
  // Only the master is read: where the host addresses it, directly (shard_state would also decode
  // a unit's bf16 or int8 moments for nothing); else through shard_state's host copies, one piece
  // at a time.
  OptimizerStates& states = *impl_->states;
  for (size_t u = 0; u < impl_->groups.size(); ++u) {
    const bool direct = states.on_host();
    const MasterShard& sh = states.shard(u);
    const std::vector<ShardExtent> pieces =
        direct ? std::vector<ShardExtent>{{sh.begin, sh.numel}} : shard_pieces(u);
    for (const ShardExtent& piece : pieces) {
      const UnitShardState st =
          direct ? UnitShardState{sh.master_ptr, nullptr, nullptr, sh.begin, sh.numel}
                 : shard_state(u, piece);
      for (int64_t i = 0; i < st.numel; ++i) {
        if (std::isfinite(st.master[i])) continue;
        const float bad = st.master[i];
        if (!direct) release_shard_state(u, false);
        fail(ErrorCode::kNonFinite,
             "{}: unit '{}' holds a non-finite fp32 master value ({}) at element {} of its "
             "group: refusing to write it",
             what, unit_name(u), bad, st.begin + i);
      }
      if (!direct) release_shard_state(u, false);
    }
  }
}

void Engine::refresh_params_from_master() {
  Impl& s = *impl_;
  s.ops.synchronize();  // offload staging (host_out) may still feed the last step's uploads
  for (ParamGroup& g : s.groups) {
    s.states->refresh(static_cast<size_t>(g.index()));  // shard_state()'s host copies
    s.states->cast_to_params(g);
  }
  for (ParamGroup& g : s.groups) {
    if (WorkHandle w = g.start_gather_updated_params()) s.works.push_back(std::move(w));
  }
  s.wait_all();
  s.ops.synchronize();
}

std::vector<float> Engine::gather_master_group(size_t ui) {
  Impl& s = *impl_;
  const GroupLayout& l = s.groups.at(ui).layout();
  const MasterShard& m = s.states->shard(ui);
  std::vector<float> full(static_cast<size_t>(l.padded_numel));
  const size_t n = static_cast<size_t>(l.shard_numel);
  if (m.numel == l.padded_numel) {  // the whole group is held
    s.ops.copy_to_host(full.data(), m.master_ptr, full.size() * sizeof(float));
  } else if (s.staging->staged() && s.states->on_host()) {
    // A host master on a device engine: its shard at its place, gathered in place (staged).
    std::memcpy(full.data() + n * static_cast<size_t>(s.shard->rank()), m.master_ptr,
                n * sizeof(float));
    s.staging->all_gather(*s.shard, full.data(), n, DType::kF32);
  } else {
    s.staging->gather_to_host(*s.shard, m.master_ptr, full.data(), n, DType::kF32);
  }
  return full;
}

std::vector<float> Engine::gather_master_param(size_t ui, size_t p) {
  const std::vector<float> full = gather_master_group(ui);
  const ParamSlot& slot = impl_->groups.at(ui).layout().params.at(p);
  return {full.begin() + slot.offset, full.begin() + slot.offset + slot.numel};
}

std::vector<float> Engine::gather_frozen_param(size_t ui, size_t f) {
  ParamGroup& g = impl_->groups.at(ui);
  const FrozenRecord& r = g.frozen_layout().records.at(f);
  const std::vector<uint8_t> bytes = g.gather_frozen_bytes(*impl_->staging);
  std::vector<float> out(static_cast<size_t>(r.numel));
  decode_frozen_record(bytes.data() + r.offset, r, out.data());
  return out;
}

FrozenUnitBytes Engine::gather_frozen_unit(size_t ui) {
  ParamGroup& g = impl_->groups.at(ui);
  FrozenUnitBytes out;
  out.records = g.frozen_layout().records;
  if (!out.records.empty()) out.bytes = g.gather_frozen_bytes(*impl_->staging);
  return out;
}

void FrozenUnitBytes::decode(size_t f, std::vector<float>& out, int threads) const {
  const FrozenRecord& r = records.at(f);
  // Never the old and the new allocation at once: the values are about to be overwritten.
  if (out.capacity() < static_cast<size_t>(r.numel)) std::vector<float>().swap(out);
  out.resize(static_cast<size_t>(r.numel));
  decode_frozen_record(bytes.data() + r.offset, r, out.data(), threads);
}

void Engine::set_frozen_param(size_t ui, size_t f, const float* values) {
  impl_->frozen_hash_cache.reset();
  impl_->ops.synchronize();  // a unit may still compute from the stored bytes
  impl_->groups.at(ui).set_frozen(f, values);
}

ElementRange Engine::frozen_param_needs(size_t ui, size_t f) const {
  return impl_->groups.at(ui).frozen_reads(f);
}

void Engine::set_frozen_param_range(size_t ui, size_t f, int64_t first, int64_t count,
                                    const float* values, int threads) {
  impl_->frozen_hash_cache.reset();
  ParamGroup& g = impl_->groups.at(ui);
  const ElementRange need = g.frozen_reads(f);
  ZS_CHECK(need.count() == 0 || (first <= need.first && need.end <= first + count),
           ErrorCode::kInvalidArgument,
           "set_frozen_param_range: unit {} frozen parameter {}: elements [{}, {}) given, this "
           "rank needs [{}, {})",
           unit_name(ui), g.frozen_specs().at(f).name, first, first + count, need.first, need.end);
  impl_->ops.synchronize();  // a unit may still compute from the stored bytes
  g.set_frozen_collective(
      f,
      [values, first](int64_t a, int64_t n, float* out) {
        std::copy(values + (a - first), values + (a - first) + n, out);
      },
      threads);
}

uint64_t Engine::frozen_hash() {
  // The base is hashed once (at 7B, an all-gather of 6.7 GB): later calls reuse the value unless
  // some rank's frozen bytes were set since.
  double stale = impl_->frozen_hash_cache ? 0 : 1;
  impl_->comm.all_reduce(&stale, &stale, 1, DType::kF64, ReduceOp::kMax);
  if (!stale) return *impl_->frozen_hash_cache;
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  for (ParamGroup& g : impl_->groups) {
    if (g.frozen_layout().empty()) continue;
    const std::vector<uint8_t> bytes = g.gather_frozen_bytes(*impl_->staging);
    for (const FrozenRecord& r : g.frozen_layout().records) {
      XXH64_update(h, bytes.data() + r.offset, static_cast<size_t>(r.bytes));
    }
  }
  const uint64_t d = XXH64_digest(h);
  XXH64_freeState(h);
  impl_->frozen_hash_cache = d;
  return d;
}

namespace {

// Feeds the parameter elements among padded-group elements [g0, g0 + n) (held in `data`) to the
// hash, slots in order; the slots of `l` lie in increasing offset order.
void hash_slot_overlap(XXH64_state_t* h, const GroupLayout& l, int64_t g0, int64_t n,
                       const float* data) {
  for (const ParamSlot& slot : l.params) {
    const int64_t a = std::max(g0, slot.offset), b = std::min(g0 + n, slot.offset + slot.numel);
    if (a < b) XXH64_update(h, data + (a - g0), static_cast<size_t>(b - a) * sizeof(float));
  }
}

bool slots_in_offset_order(const GroupLayout& l) {
  for (size_t p = 1; p < l.params.size(); ++p) {
    if (l.params[p].offset < l.params[p - 1].offset + l.params[p - 1].numel) return false;
  }
  return true;
}

}  // namespace

uint64_t Engine::param_hash() {
  Impl& s = *impl_;
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  // A sharded master is streamed: each rank's shard, in rank order, is broadcast a piece at a
  // time and every rank hashes the same stream, so no rank holds a whole unit (at Llama-3's
  // vocabulary the embedding unit is 1.05 GB of fp32, more than a run's plan leaves free).
  constexpr int64_t kPiece = int64_t{1} << 24;  // elements: 64 MiB
  std::vector<float> piece;
  for (size_t ui = 0; ui < s.groups.size(); ++ui) {
    const GroupLayout& l = s.groups[ui].layout();
    const MasterShard& m = s.states->shard(ui);
    if (m.numel == l.padded_numel || !slots_in_offset_order(l)) {
      const std::vector<float> full = gather_master_group(ui);
      for (const ParamSlot& slot : l.params) {
        XXH64_update(h, full.data() + slot.offset, static_cast<size_t>(slot.numel) * sizeof(float));
      }
      continue;
    }
    const int64_t n = l.shard_numel;
    const bool host = s.states->on_host() || s.ops.host_accessible();
    piece.resize(static_cast<size_t>(std::min(kPiece, n)));
    for (int r = 0; r < s.shard->size(); ++r) {
      for (int64_t c = 0; c < n; c += kPiece) {
        const int64_t k = std::min(kPiece, n - c);
        if (r == s.shard->rank()) {
          if (host) {
            std::memcpy(piece.data(), m.master_ptr + c, static_cast<size_t>(k) * sizeof(float));
          } else {
            s.ops.copy_to_host(piece.data(), m.master_ptr + c,
                               static_cast<size_t>(k) * sizeof(float));
          }
        }
        s.shard->broadcast(piece.data(), static_cast<size_t>(k), DType::kF32, r);
        hash_slot_overlap(h, l, n * r + c, k, piece.data());
      }
    }
  }
  const uint64_t d = XXH64_digest(h);
  XXH64_freeState(h);
  return d;
}

std::string param_hash_hex(uint64_t hash) { return fmt::format("{:016x}", hash); }

}  // namespace zs
