#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <xxhash.h>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "offload/cpu_adam.h"
#include "offload/host_arena.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/loss_scaler.h"
#include "optim/sgd.h"
#include "runtime/buffer_plan.h"
#include "runtime/param_init.h"
#include "sharding/gather_scheduler.h"

namespace zs {

namespace {

const void* at(const void* p, int64_t elems, DType dt) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}
void* at(void* p, int64_t elems, DType dt) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace

// Everything this rank holds for one unit. See runtime/buffer_plan.h for the sizes.
struct UnitState {
  std::string name;
  std::vector<ParamSpec> specs;
  GroupLayout layout;
  Buffer params;      // compute dtype: full replica (stages 0-2) or shard (stage 3)
  Buffer grads;       // grad dtype: full (stages 0-1) or shard (stages 2-3)
  Buffer master;      // fp32 master; empty when the params are their own master or offloaded
  Buffer exp_avg;     // Adam m / SGD momentum (empty when offloaded)
  Buffer exp_avg_sq;  // Adam v (empty when offloaded)
  float* master_ptr = nullptr;  // into `master`, `params` or the host arena
  float* m_ptr = nullptr;
  float* v_ptr = nullptr;
  int64_t master_begin = 0;
  int64_t master_numel = 0;
  std::vector<ShardSegment> update_segments;  // pieces of the master holding parameters
  std::vector<ShardSegment> norm_segments;    // pieces of this rank's shard (norm, finite check)
  std::vector<ParamView> resident_views;      // stages 0-2: views into params
  std::vector<std::vector<ParamView>> slot_views;  // stage 3: views into each gather slot
  GradViews grad_views[2];                         // views into gradient scratch 0 / 1
  // Device engines with offload: this unit's gradient shard and updated parameter shard in the
  // page-locked staging arena ([Note: offload on a device]).
  void* host_grad = nullptr;
  void* host_out = nullptr;
  // Device engines without offload: host copies of master, m, v for shard_state().
  std::vector<float> mirror;
  bool mirror_written = false;
};

struct Engine::Impl {
  Impl(Model& m, Communicator& c, const EngineConfig& cfg, MemoryTracker* t, DeviceOps& o)
      : model(m), comm(c), config(cfg), scaler(cfg.loss_scale), tracker(t), ops(o) {}

  Model& model;
  Communicator& comm;
  const EngineConfig& config;
  optim::LossScaler scaler;
  MemoryTracker* tracker;
  DeviceOps& ops;
  bool on_host = true;         // ops.host_accessible(): buffers are host memory
  bool master_on_host = true;  // the fp32 master / optimizer state is host memory
  int rank = 0;
  int world = 1;
  int stage = 3;
  DType P = DType::kF32;
  DType G = DType::kF32;

  BufferPlan plan;
  std::unique_ptr<offload::HostArena> arena;    // offloaded master and optimizer state
  std::unique_ptr<offload::HostArena> staging;  // device engines with offload: shard staging
  Buffer ctrl;  // device engines: staging for host-side control collectives
  std::vector<UnitState> units;
  std::vector<Buffer> grad_scratch, send_bufs, recv_bufs;
  std::unique_ptr<GatherScheduler> gathers;
  std::vector<GatherScheduler::Source> gather_sources;
  std::vector<int> schedule;  // forward 0..U-1 then backward U-1..0

  struct PendingReduce {
    WorkHandle work;
    int unit = -1;
    int recv = -1;      // >= 0: add recv_bufs[recv] into the shard once complete
    bool last = false;  // the step's last reduction of this unit: its shard is final
  };
  PendingReduce pending[2];
  std::vector<WorkHandle> works;
  std::vector<double> reduce_vec;  // [loss sum, sum of squares, non-finite flag per unit]
  std::vector<DeviceOps::StatsSpan> stats_spans;
  std::vector<uint8_t> finite_flags;

  void build(const std::vector<GroupLayout>& layouts, std::vector<std::vector<ParamSpec>> specs);
  void check_agreement(const std::vector<GroupLayout>& layouts);
  void init_parameters();
  void host_collective(void* data, size_t count, DType dt, bool gather);
  Allocator* device_alloc() { return &ops.allocator(); }
  void stage_grad_to_host(UnitState& u);
  void cast_master_to_params(UnitState& u);
  bool params_are_master(const UnitState& u) const {
    return u.master.empty() && !config.offload.optimizer;
  }
  std::span<const ParamView> acquire_views(int64_t pos, size_t unit, int64_t* slot_pos);
  void release_views(int64_t slot_pos);
  void backward_unit(size_t u, int micro, int scratch, const StepInfo& info);
  void finish_reduce(int b);
  void update_unit(UnitState& u, float lr, float grad_scale, int64_t t);
  void start_gather_updated_params(UnitState& u);
  void gather_updated_params();
  StepStats step(int64_t step_index);
  void forward_eval();
};

// ---------------------------------------------------------------------------------------------
// Construction

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
  std::vector<std::vector<ParamSpec>> specs(U);
  std::vector<GroupLayout> layouts;
  for (size_t u = 0; u < U; ++u) {
    Unit& unit = model.unit(u);
    specs[u] = unit.param_specs();
    ZS_CHECK(!specs[u].empty(), ErrorCode::kInvalidArgument,
             "unit {} ('{}') declares no parameters: every unit needs at least one", u,
             unit.name());
    std::vector<int64_t> numels;
    for (const ParamSpec& p : specs[u]) {
      ZS_CHECK(p.numel() >= 1, ErrorCode::kInvalidArgument,
               "unit {} ('{}') parameter '{}' has {} elements", u, unit.name(), p.name, p.numel());
      numels.push_back(p.numel());
    }
    layouts.push_back(compute_group_layout(numels, comm.size(), config_.align));
  }
  impl_->build(layouts, std::move(specs));
}

Engine::~Engine() {
  if (!impl_) return;
  // A destructor cannot report: errors are dropped. Device work still in flight (the last
  // step's update, uploads and collectives) must finish before the buffers go back to their
  // allocator and the staging arena is freed.
  try {
    if (impl_->gathers) impl_->gathers->finish();
    impl_->ops.synchronize();
  } catch (...) {
  }
}

void Engine::Impl::check_agreement(const std::vector<GroupLayout>& layouts) {
  // Every rank must run the same model and configuration: compare a hash of both.
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  auto add = [&](const void* p, size_t n) { XXH64_update(h, p, n); };
  const int vals[] = {stage,
                      static_cast<int>(P),
                      static_cast<int>(G),
                      config.micro_batches,
                      config.prefetch,
                      static_cast<int>(config.optimizer.kind),
                      config.offload.optimizer ? 1 : 0};
  add(vals, sizeof(vals));
  add(&config.seed, sizeof(config.seed));
  add(&config.align, sizeof(config.align));
  for (const GroupLayout& l : layouts) {
    for (const ParamSlot& s : l.params) add(&s.numel, sizeof(s.numel));
  }
  std::vector<uint64_t> all(static_cast<size_t>(world));
  all[static_cast<size_t>(rank)] = XXH64_digest(h);
  XXH64_freeState(h);
  host_collective(all.data(), sizeof(uint64_t), DType::kU8, /*gather=*/true);
  for (int r = 0; r < world; ++r) {
    ZS_CHECK(all[r] == all[0], ErrorCode::kInvalidArgument,
             "rank {} has a different model or engine configuration than rank 0 (stage, dtypes, "
             "micro-batches, prefetch, optimizer, seed or parameter shapes differ)",
             r);
  }
}

// A small collective over host memory: all-gather (this rank's `count` elements at its own place
// in `data`, world * count in all) or sum all-reduce in place. Device communicators work on
// device memory only, so a device engine stages the bytes through `ctrl`.
void Engine::Impl::host_collective(void* data, size_t count, DType dt, bool gather) {
  const size_t total = gather ? count * static_cast<size_t>(world) : count;
  const size_t bytes = total * dtype_size(dt);
  void* own = static_cast<char*>(data) + (gather ? count * dtype_size(dt) * rank : 0);
  if (on_host) {
    if (gather) {
      comm.all_gather(own, data, count, dt);
    } else {
      comm.all_reduce(data, data, count, dt, ReduceOp::kSum);
    }
    return;
  }
  ZS_ASSERT(ctrl.size() >= bytes);  // sized by the plan (ctrl_bytes)
  ops.copy_from_host(ctrl.data(), data, bytes);
  if (gather) {
    void* dev_own = static_cast<char*>(ctrl.data()) + count * dtype_size(dt) * rank;
    comm.all_gather(dev_own, ctrl.data(), count, dt);
  } else {
    comm.all_reduce(ctrl.data(), ctrl.data(), count, dt, ReduceOp::kSum);
  }
  ops.copy_to_host(data, ctrl.data(), bytes);
}

void Engine::Impl::build(const std::vector<GroupLayout>& layouts,
                         std::vector<std::vector<ParamSpec>> specs) {
  rank = comm.rank();
  world = comm.size();
  stage = static_cast<int>(config.stage);
  P = config.precision.param_dtype;
  G = config.precision.grad_dtype;
  on_host = ops.host_accessible();
  master_on_host = on_host || config.offload.optimizer;
  if (config.optimizer_threads > 0) offload::set_cpu_adam_threads(config.optimizer_threads);
  plan = plan_engine_buffers(layouts, config, rank, /*on_device=*/!on_host);
  Allocator* dev = device_alloc();
  if (plan.ctrl_bytes > 0) {
    ctrl = Buffer(static_cast<size_t>(plan.ctrl_bytes), MemCategory::kCommBuffers, tracker, dev);
  }
  check_agreement(layouts);  // before the large allocations
  const size_t U = layouts.size();
  units.resize(U);
  for (size_t i = 0; i < U; ++i) {
    UnitState& u = units[i];
    const UnitBufferPlan& up = plan.units[i];
    u.name = model.unit(i).name();
    u.specs = std::move(specs[i]);
    u.layout = layouts[i];
    u.params = Buffer(up.params_bytes, MemCategory::kParams, tracker, dev);
    u.grads = Buffer(up.grads_bytes, MemCategory::kGrads, tracker, dev);
    u.master_begin = up.master_begin;
    u.master_numel = up.master_numel;
    if (config.offload.optimizer) {
      if (!arena)
        arena = std::make_unique<offload::HostArena>(
            plan.bytes(MemCategory::kHostOffload) - plan.host_staging_bytes, tracker);
      u.master_ptr = arena->take(up.master_bytes / 4);
      u.m_ptr = up.exp_avg_bytes ? arena->take(up.exp_avg_bytes / 4) : nullptr;
      u.v_ptr = up.exp_avg_sq_bytes ? arena->take(up.exp_avg_sq_bytes / 4) : nullptr;
      if (!on_host) {
        if (!staging)
          staging = std::make_unique<offload::HostArena>(plan.host_staging_bytes, tracker);
        u.host_grad =
            staging->take_bytes(static_cast<int64_t>(dtype_size(G)) * layouts[i].shard_numel);
        u.host_out =
            staging->take_bytes(static_cast<int64_t>(dtype_size(P)) * layouts[i].shard_numel);
      }
    } else {
      u.master = Buffer(up.master_bytes, up.master_category, tracker, dev);
      u.exp_avg = Buffer(up.exp_avg_bytes, up.optimizer_category, tracker, dev);
      u.exp_avg_sq = Buffer(up.exp_avg_sq_bytes, up.optimizer_category, tracker, dev);
      u.m_ptr = u.exp_avg.empty() ? nullptr : u.exp_avg.as<float>();
      u.v_ptr = u.exp_avg_sq.empty() ? nullptr : u.exp_avg_sq.as<float>();
      // fp32 compute: the parameters are the master (full in stages 0-2, shard in 3).
      u.master_ptr = up.master_bytes > 0 ? u.master.as<float>()
                                         : u.params.as<float>() + (stage == 3 ? 0 : u.master_begin);
    }
    if (stage == 0) {
      for (size_t p = 0; p < u.layout.params.size(); ++p) {
        u.update_segments.push_back(
            {static_cast<int>(p), u.layout.params[p].offset, 0, u.layout.params[p].numel});
      }
    } else {
      u.update_segments = u.layout.shard_segments(rank);
    }
    u.norm_segments = u.layout.shard_segments(rank);
    if (stage < 3) {
      for (size_t p = 0; p < u.specs.size(); ++p) {
        u.resident_views.push_back({at(u.params.data(), u.layout.params[p].offset, P), P,
                                    u.layout.params[p].numel, &u.specs[p]});
      }
    }
  }
  grad_scratch.resize(plan.grad_scratch_count);
  for (Buffer& b : grad_scratch) {
    b = Buffer(plan.grad_scratch_bytes, MemCategory::kCommBuffers, tracker, dev);
  }
  send_bufs.resize(plan.send_count);
  for (Buffer& b : send_bufs) b = Buffer(plan.send_bytes, MemCategory::kCommBuffers, tracker, dev);
  recv_bufs.resize(plan.recv_count);
  for (Buffer& b : recv_bufs) b = Buffer(plan.recv_bytes, MemCategory::kCommBuffers, tracker, dev);
  for (UnitState& u : units) {
    for (size_t s = 0; s < grad_scratch.size(); ++s) {
      std::vector<float*> spans;
      std::vector<int64_t> numels;
      for (const ParamSlot& slot : u.layout.params) {
        spans.push_back(grad_scratch[s].as<float>() + slot.offset);
        numels.push_back(slot.numel);
      }
      u.grad_views[s] = GradViews(std::move(spans), std::move(numels));
    }
  }
  if (stage == 3) {
    gathers = std::make_unique<GatherScheduler>(comm, P, plan.max_padded_numel, config.prefetch,
                                                tracker, dev);
    for (UnitState& u : units) {
      gather_sources.push_back({u.params.data(), u.layout.shard_numel});
      u.slot_views.resize(gathers->num_slots());
      for (int s = 0; s < gathers->num_slots(); ++s) {
        for (size_t p = 0; p < u.specs.size(); ++p) {
          u.slot_views[s].push_back({at(gathers->slot_data(s), u.layout.params[p].offset, P), P,
                                     u.layout.params[p].numel, &u.specs[p]});
        }
      }
    }
  }
  for (size_t u = 0; u < U; ++u) schedule.push_back(static_cast<int>(u));
  for (size_t u = U; u-- > 0;) schedule.push_back(static_cast<int>(u));
  works.reserve(2 * U);
  reduce_vec.assign(2 + U, 0.0);
  finite_flags.assign(U, 1);
  for (size_t i = 0; i < U; ++i) {
    UnitState& u = units[i];
    const int64_t begin = stage >= 2 ? 0 : u.layout.shard_begin(rank);
    for (const ShardSegment& seg : u.norm_segments) {
      stats_spans.push_back(
          {at(u.grads.data(), begin + seg.shard_offset, G), G, seg.length, static_cast<int>(i)});
    }
  }
  init_parameters();
}

void Engine::Impl::init_parameters() {
  std::vector<float> host_master, tmp;
  std::vector<char> host_param;
  for (size_t i = 0; i < units.size(); ++i) {
    UnitState& u = units[i];
    // The fp32 master: the elements [master_begin, master_begin + master_numel) of the group,
    // drawn on the host (into a staging copy when the master lives on a device).
    float* master = u.master_ptr;
    if (!master_on_host) {
      host_master.assign(static_cast<size_t>(u.master_numel), 0.0f);
      master = host_master.data();
    }
    for (const ShardSegment& s : u.update_segments) {
      init_param_values(u.specs[s.param].init, config.seed, static_cast<uint32_t>(i),
                        static_cast<uint32_t>(s.param), s.param_offset, s.length,
                        master + s.shard_offset);
    }
    if (!master_on_host) {
      ops.copy_from_host(u.master_ptr, master, static_cast<size_t>(u.master_numel) * sizeof(float));
    }
    if (stage == 1 || stage == 2) {
      // The full compute-dtype replica: every rank computes all of it (no communication).
      for (size_t p = 0; p < u.specs.size(); ++p) {
        const ParamSlot& slot = u.layout.params[p];
        const size_t n = static_cast<size_t>(slot.numel);
        tmp.resize(n);
        init_param_values(u.specs[p].init, config.seed, static_cast<uint32_t>(i),
                          static_cast<uint32_t>(p), 0, slot.numel, tmp.data());
        void* dst = at(u.params.data(), slot.offset, P);
        if (on_host) {
          convert(tmp.data(), DType::kF32, dst, P, n);
        } else {
          host_param.resize(n * dtype_size(P));
          convert(tmp.data(), DType::kF32, host_param.data(), P, n);
          ops.copy_from_host(dst, host_param.data(), host_param.size());
        }
      }
    } else {
      cast_master_to_params(u);
    }
  }
  ops.synchronize();
}

// Stage 0: full master -> full params; stage 3: master shard -> param shard; stages 1-2: master
// shard -> this rank's region of the full params (an all-gather then completes them).
void Engine::Impl::cast_master_to_params(UnitState& u) {
  if (params_are_master(u)) return;
  void* dst = stage == 3 ? u.params.data() : at(u.params.data(), u.master_begin, P);
  if (master_on_host && !on_host) {  // offloaded master of a device engine: cast, then upload
    convert(u.master_ptr, DType::kF32, u.host_out, P, static_cast<size_t>(u.master_numel));
    ops.copy_from_host_async(dst, u.host_out, static_cast<size_t>(u.master_numel) * dtype_size(P));
    return;
  }
  ops.convert(u.master_ptr, DType::kF32, dst, P, u.master_numel);
}

// ---------------------------------------------------------------------------------------------
// One step

std::span<const ParamView> Engine::Impl::acquire_views(int64_t pos, size_t unit,
                                                       int64_t* slot_pos) {
  if (stage < 3) {
    *slot_pos = -1;
    return units[unit].resident_views;
  }
  *slot_pos = pos;
  return units[unit].slot_views[gathers->acquire(pos)];
}

void Engine::Impl::release_views(int64_t slot_pos) {
  if (slot_pos >= 0) gathers->release(slot_pos);
}

void Engine::Impl::finish_reduce(int b) {
  PendingReduce& pr = pending[b];
  if (!pr.work) return;
  pr.work->wait();
  pr.work.reset();
  UnitState& u = units[pr.unit];
  if (pr.recv >= 0) {
    ops.accumulate(u.grads.data(), G, recv_bufs[pr.recv].data(), G, u.layout.shard_numel);
  }
  if (pr.last) stage_grad_to_host(u);
  pr.unit = -1;
  pr.recv = -1;
  pr.last = false;
}

void Engine::Impl::backward_unit(size_t ui, int micro, int scratch, const StepInfo& info) {
  UnitState& u = units[ui];
  Buffer& buf = grad_scratch[scratch];
  ops.zero(buf.data(), static_cast<size_t>(u.layout.padded_numel) * sizeof(float));
  GradViews& gv = u.grad_views[scratch];
  gv.clear_produced();
  int64_t slot_pos = 0;
  const int64_t pos = static_cast<int64_t>(micro) * static_cast<int64_t>(schedule.size()) +
                      static_cast<int64_t>(units.size() + (units.size() - 1 - ui));
  std::span<const ParamView> views = acquire_views(pos, ui, &slot_pos);
  model.unit(ui).backward(views, gv, info);
  release_views(slot_pos);
  for (size_t p = 0; p < u.specs.size(); ++p) {
    ZS_CHECK(gv.produced(p), ErrorCode::kInvalidArgument,
             "unit {} ('{}'): backward did not produce the gradient of parameter '{}'", ui, u.name,
             u.specs[p].name);
  }
}

StepStats Engine::Impl::step(int64_t t) {
  const size_t U = units.size();
  // shard_state() host copies taken before this step are stale from here on.
  if (!master_on_host) {
    for (UnitState& u : units) u.mirror_written = false;
  }
  const int k = config.micro_batches;
  const int64_t period = static_cast<int64_t>(schedule.size());
  const bool fp32_grads = G == DType::kF32;
  if (stage == 3) gathers->begin(&gather_sources, schedule.data(), period, period * k);
  const float scale = scaler.scale();
  double loss_sum = 0.0;
  int64_t reduce_count = 0;
  for (int m = 0; m < k; ++m) {
    model.load_micro_batch(m);
    const StepInfo info{m, k, scale, true};
    for (size_t ui = 0; ui < U; ++ui) {
      int64_t slot_pos = 0;
      auto views = acquire_views(m * period + static_cast<int64_t>(ui), ui, &slot_pos);
      model.unit(ui).forward(views, info);
      release_views(slot_pos);
    }
    for (size_t j = 0; j < U; ++j) {
      const size_t ui = U - 1 - j;
      UnitState& u = units[ui];
      const int64_t S = u.layout.shard_numel;
      if (stage >= 2) {
        // Double buffering: buffers b were last used by the reduction two units ago.
        const int b = static_cast<int>(reduce_count++ % 2);
        finish_reduce(b);
        const int scratch = fp32_grads ? b : 0;
        backward_unit(ui, m, scratch, info);
        const void* send = grad_scratch[scratch].data();
        if (!fp32_grads) {
          ops.convert(send, DType::kF32, send_bufs[b].data(), G, u.layout.padded_numel);
          send = send_bufs[b].data();
        }
        // The first micro-batch's reduction lands in the shard; later ones are added to it.
        void* recv = m == 0 ? u.grads.data() : recv_bufs[b].data();
        pending[b].work =
            comm.start_reduce_scatter(send, recv, static_cast<size_t>(S), G, ReduceOp::kSum);
        pending[b].unit = static_cast<int>(ui);
        pending[b].recv = m == 0 ? -1 : b;
        pending[b].last = m == k - 1;
      } else {
        backward_unit(ui, m, 0, info);
        const float* g = grad_scratch[0].as<float>();
        if (m == 0) {
          ops.convert(g, DType::kF32, u.grads.data(), G, u.layout.padded_numel);
        } else {
          ops.accumulate(u.grads.data(), G, g, DType::kF32, u.layout.padded_numel);
        }
        if (m == k - 1) {  // reduce once per step, in place into this rank's region
          works.push_back(comm.start_reduce_scatter(
              u.grads.data(), at(u.grads.data(), u.layout.shard_begin(rank), G),
              static_cast<size_t>(S), G, ReduceOp::kSum));
        }
      }
    }
    // Read after the backward was issued: a device model's loss() waits for the forward only,
    // while the backward already queued keeps the device busy.
    loss_sum += model.loss();
  }
  finish_reduce(0);
  finish_reduce(1);
  for (WorkHandle& w : works) w->wait();
  works.clear();
  if (stage < 2) {
    for (UnitState& u : units) stage_grad_to_host(u);
  }
  if (stage == 3) gathers->finish();
  if (stage == 0) {  // every rank needs the whole reduced gradient: all-gather it in place
    for (UnitState& u : units) {
      works.push_back(comm.start_all_gather(at(u.grads.data(), u.layout.shard_begin(rank), G),
                                            u.grads.data(),
                                            static_cast<size_t>(u.layout.shard_numel), G));
    }
    for (WorkHandle& w : works) w->wait();
    works.clear();
  }

  // One all-reduce: loss, sum of squares of this rank's shard, non-finite flags per unit.
  reduce_vec[0] = loss_sum;
  reduce_vec[1] = ops.grad_stats(stats_spans, finite_flags);
  // The staged gradient shards are complete (and the next step may write the device shards).
  if (master_on_host && !on_host) ops.wait_host_copies();
  for (size_t ui = 0; ui < U; ++ui) reduce_vec[2 + ui] = finite_flags[ui] ? 0.0 : 1.0;
  host_collective(reduce_vec.data(), reduce_vec.size(), DType::kF64, /*gather=*/false);

  StepStats stats;
  stats.loss = reduce_vec[0] / (static_cast<double>(k) * world);
  stats.loss_scale = scale;
  const double inv = 1.0 / (static_cast<double>(scale) * world * k);
  stats.grad_norm = std::sqrt(reduce_vec[1]) * inv;
  for (size_t ui = 0; ui < U; ++ui) {
    if (reduce_vec[2 + ui] > 0.0) {
      stats.skipped = true;
      stats.nonfinite_unit = units[ui].name;
      break;
    }
  }
  const bool apply = scaler.update(stats.skipped);
  stats.lr = config.optimizer.schedule.at(t);
  if (!apply) {
    stats.step = t - 1;
    return stats;
  }
  const float clip = optim::clip_factor(stats.grad_norm, config.clip_norm);
  const float grad_scale = static_cast<float>(inv) * clip;
  // Stages 1-2: each unit's all-gather starts as soon as its update is issued, so it overlaps
  // the updates of the units after it (the buffers are disjoint); waited for once, at the end.
  for (UnitState& u : units) {
    update_unit(u, stats.lr, grad_scale, t);
    start_gather_updated_params(u);
  }
  for (WorkHandle& w : works) w->wait();
  works.clear();
  stats.step = t;
  return stats;
}

// [Note: offload on a device] A device engine with an offloaded optimizer keeps master, m and v
// in the host arena. Each unit's final gradient shard is copied to the page-locked staging arena
// on the copy stream as soon as its last reduction completes (stages 2-3: during the backward of
// the remaining units; stages 0-1: after the step's reductions). The CPU Adam then updates the
// master from the staged gradient and writes the compute-dtype shard into staging, which is
// uploaded on the compute stream ahead of the next all-gather or forward. On the CPU backend
// the shards are host memory and nothing is staged.
void Engine::Impl::stage_grad_to_host(UnitState& u) {
  if (on_host || !config.offload.optimizer) return;
  const void* shard =
      stage >= 2 ? u.grads.data() : at(u.grads.data(), u.layout.shard_begin(rank), G);
  ops.copy_to_host_async(u.host_grad, shard,
                         static_cast<size_t>(u.layout.shard_numel) * dtype_size(G));
}

void Engine::Impl::update_unit(UnitState& u, float lr, float grad_scale, int64_t t) {
  const int64_t shard_begin = u.layout.shard_begin(rank);
  const void* grad_base = stage == 1 ? at(u.grads.data(), shard_begin, G) : u.grads.data();
  void* out_base = nullptr;
  if (!params_are_master(u)) {
    out_base = stage == 1 || stage == 2 ? at(u.params.data(), shard_begin, P) : u.params.data();
  }
  void* device_out = nullptr;  // device engines with offload: upload host_out to here
  if (master_on_host && !on_host) {
    grad_base = u.host_grad;
    device_out = out_base;
    out_base = u.host_out;
  }
  const bool adam = config.optimizer.kind == OptimizerKind::kAdamW;
  optim::AdamWStep with_decay, without_decay;
  if (adam) {
    with_decay = optim::make_adamw_step(config.optimizer.adamw, lr, t, grad_scale, true);
    without_decay = optim::make_adamw_step(config.optimizer.adamw, lr, t, grad_scale, false);
  }
  float* m = u.m_ptr;
  float* v = u.v_ptr;
  for (const ShardSegment& s : u.update_segments) {
    const bool decay = u.specs[s.param].weight_decay;
    const int64_t o = s.shard_offset;
    void* out = out_base ? at(out_base, o, P) : nullptr;
    const optim::AdamWStep& st = decay ? with_decay : without_decay;
    if (master_on_host && !on_host) {  // offloaded: the CPU Adam on the staged shard
      offload::cpu_adamw(u.master_ptr + o, at(grad_base, o, G), G, m + o, v + o, s.length, st, out,
                         P);
    } else if (adam) {
      ops.adamw(u.master_ptr + o, at(grad_base, o, G), G, m + o, v + o, s.length, st, out, P);
    } else {
      ops.sgd(u.master_ptr + o, at(grad_base, o, G), G, m ? m + o : nullptr, s.length,
              config.optimizer.sgd, lr, grad_scale, decay, out, P);
    }
  }
  if (device_out) {
    ops.copy_from_host_async(device_out, u.host_out,
                             static_cast<size_t>(u.layout.shard_numel) * dtype_size(P));
  }
}

// Stages 1-2 keep full parameters: each rank updated its region, an all-gather completes them.
void Engine::Impl::start_gather_updated_params(UnitState& u) {
  if (stage != 1 && stage != 2) return;
  works.push_back(comm.start_all_gather(at(u.params.data(), u.layout.shard_begin(rank), P),
                                        u.params.data(), static_cast<size_t>(u.layout.shard_numel),
                                        P));
}

void Engine::Impl::gather_updated_params() {
  for (UnitState& u : units) start_gather_updated_params(u);
  for (WorkHandle& w : works) w->wait();
  works.clear();
}

void Engine::Impl::forward_eval() {
  const size_t U = units.size();
  if (stage == 3) {
    gathers->begin(&gather_sources, schedule.data(), static_cast<int64_t>(U),
                   static_cast<int64_t>(U));
  }
  const StepInfo info{0, 1, 1.0f, false};
  for (size_t ui = 0; ui < U; ++ui) {
    int64_t slot_pos = 0;
    auto views = acquire_views(static_cast<int64_t>(ui), ui, &slot_pos);
    model.unit(ui).forward(views, info);
    release_views(slot_pos);
  }
  if (stage == 3) gathers->finish();
}

// ---------------------------------------------------------------------------------------------
// Public methods

StepStats Engine::step() {
  StepStats s = impl_->step(step_ + 1);
  step_ = s.step;
  return s;
}

void Engine::forward() { impl_->forward_eval(); }

size_t Engine::num_units() const { return impl_->units.size(); }
const GroupLayout& Engine::layout(size_t u) const { return impl_->units.at(u).layout; }
const std::vector<ParamSpec>& Engine::param_specs(size_t u) const {
  return impl_->units.at(u).specs;
}
const std::string& Engine::unit_name(size_t u) const { return impl_->units.at(u).name; }

int64_t Engine::num_params() const {
  int64_t n = 0;
  for (const UnitState& u : impl_->units) n += u.layout.numel;
  return n;
}
int64_t Engine::num_padded_params() const {
  int64_t n = 0;
  for (const UnitState& u : impl_->units) n += u.layout.padded_numel;
  return n;
}
int64_t Engine::padding_bytes() const { return impl_->plan.padding_bytes(); }
int64_t Engine::planned_bytes(MemCategory c) const { return impl_->plan.bytes(c); }

optim::LossScalerState Engine::loss_scaler_state() const { return impl_->scaler.state(); }
void Engine::restore_loss_scaler(const optim::LossScalerState& st) { impl_->scaler.restore(st); }

UnitShardState Engine::shard_state(size_t ui) {
  Impl& s = *impl_;
  UnitState& u = s.units.at(ui);
  UnitShardState st;
  st.master = u.master_ptr;
  st.exp_avg = u.m_ptr;
  st.exp_avg_sq = u.v_ptr;
  st.begin = u.master_begin;
  st.numel = u.master_numel;
  if (!s.master_on_host) {  // host copies of the device state (see the header)
    const size_t n = static_cast<size_t>(u.master_numel);
    u.mirror.assign(3 * n, 0.0f);
    float* dst[3] = {u.mirror.data(), u.mirror.data() + n, u.mirror.data() + 2 * n};
    float* src[3] = {u.master_ptr, u.m_ptr, u.v_ptr};
    for (int k = 0; k < 3; ++k) {
      if (src[k]) s.ops.copy_to_host(dst[k], src[k], n * sizeof(float));
    }
    st.master = dst[0];
    st.exp_avg = u.m_ptr ? dst[1] : nullptr;
    st.exp_avg_sq = u.v_ptr ? dst[2] : nullptr;
    u.mirror_written = true;
  }
  return st;
}

void Engine::refresh_params_from_master() {
  Impl& s = *impl_;
  s.ops.synchronize();  // offload staging (host_out) may still feed the last step's uploads
  for (UnitState& u : s.units) {
    if (u.mirror_written) {  // upload what was written through shard_state()'s host copies
      const size_t n = static_cast<size_t>(u.master_numel);
      float* dst[3] = {u.master_ptr, u.m_ptr, u.v_ptr};
      for (int k = 0; k < 3; ++k) {
        if (dst[k]) s.ops.copy_from_host(dst[k], u.mirror.data() + k * n, n * sizeof(float));
      }
      u.mirror_written = false;
    }
    s.cast_master_to_params(u);
  }
  s.gather_updated_params();
  s.ops.synchronize();
}

std::vector<float> Engine::gather_master_group(size_t ui) {
  Impl& s = *impl_;
  UnitState& u = s.units.at(ui);
  std::vector<float> full(static_cast<size_t>(u.layout.padded_numel));
  const size_t shard_bytes = static_cast<size_t>(u.layout.shard_numel) * sizeof(float);
  if (s.stage == 0) {
    s.ops.copy_to_host(full.data(), u.master_ptr, full.size() * sizeof(float));
  } else if (s.on_host) {
    s.comm.all_gather(u.master_ptr, full.data(), static_cast<size_t>(u.layout.shard_numel),
                      DType::kF32);
  } else {  // a device communicator gathers device memory: stage through two temporaries
    Buffer shard(shard_bytes, MemCategory::kOther, s.tracker, s.device_alloc());
    Buffer all(full.size() * sizeof(float), MemCategory::kOther, s.tracker, s.device_alloc());
    if (s.master_on_host) {
      s.ops.copy_from_host(shard.data(), u.master_ptr, shard_bytes);
    } else {
      s.ops.convert(u.master_ptr, DType::kF32, shard.data(), DType::kF32, u.layout.shard_numel);
    }
    s.comm.all_gather(shard.data(), all.data(), static_cast<size_t>(u.layout.shard_numel),
                      DType::kF32);
    s.ops.copy_to_host(full.data(), all.data(), full.size() * sizeof(float));
  }
  return full;
}

std::vector<float> Engine::gather_master_param(size_t ui, size_t p) {
  const std::vector<float> full = gather_master_group(ui);
  const ParamSlot& slot = impl_->units.at(ui).layout.params.at(p);
  return {full.begin() + slot.offset, full.begin() + slot.offset + slot.numel};
}

uint64_t Engine::param_hash() {
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  for (size_t ui = 0; ui < impl_->units.size(); ++ui) {
    const std::vector<float> full = gather_master_group(ui);
    for (const ParamSlot& slot : impl_->units[ui].layout.params) {
      XXH64_update(h, full.data() + slot.offset, static_cast<size_t>(slot.numel) * sizeof(float));
    }
  }
  const uint64_t d = XXH64_digest(h);
  XXH64_freeState(h);
  return d;
}

std::string param_hash_hex(uint64_t hash) { return fmt::format("{:016x}", hash); }

}  // namespace zs
