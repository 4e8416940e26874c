#include "planner/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sharding/layout.h"

namespace zs {

std::vector<std::vector<int64_t>> units_for_param_count(int64_t n) {
  ZS_CHECK(n >= 1, ErrorCode::kInvalidArgument, "parameter count {} < 1", n);
  // 12 L C^2 = n with C = 128 L  =>  L = cbrt(n / (12 * 128^2)).
  const double l = std::cbrt(static_cast<double>(n) / (12.0 * 128.0 * 128.0));
  const int64_t L = std::clamp<int64_t>(std::llround(l), 1, n);
  std::vector<std::vector<int64_t>> units;
  for (int64_t i = 0; i < L; ++i) units.push_back({n / L + (i < n % L ? 1 : 0)});
  return units;
}

ModelDesc ModelDesc::from_units(std::vector<std::vector<int64_t>> units, ActivationFn activations) {
  ModelDesc d;
  d.units = std::move(units);
  d.activations = std::move(activations);
  return d;
}

ModelDesc ModelDesc::from_param_count(int64_t n) { return from_units(units_for_param_count(n)); }

ModelDesc ModelDesc::from_model(Model& model) {
  ModelDesc d;
  bool any_frozen = false;
  std::vector<std::vector<ParamSpec>> specs;
  for (size_t u = 0; u < model.num_units(); ++u) {
    std::vector<int64_t> numels;
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<FrozenParamDesc> frozen;
    specs.push_back(model.unit(u).param_specs());
    for (const ParamSpec& p : specs.back()) {
      if (p.tied()) continue;  // the owner's
      if (p.trainable) {
        numels.push_back(p.numel());
        names.push_back(model.unit(u).name() + "." + p.name);
        shapes.push_back(p.shape);
      } else {
        frozen.push_back(frozen_param_desc(p));
        any_frozen = true;
      }
    }
    d.units.push_back(std::move(numels));
    d.names.push_back(std::move(names));
    d.unit_names.push_back(model.unit(u).name());
    d.shapes.push_back(std::move(shapes));
    d.frozen.push_back(std::move(frozen));
  }
  if (!any_frozen) d.frozen.clear();
  d.ties = resolve_tied_params(specs, [&model](size_t u) { return model.unit(u).name(); });
  const ActivationPlan a = model.activation_plan();
  if (a.counted) {
    d.activations = [a](int64_t micro_batch, bool checkpoint) {
      ZS_CHECK(
          micro_batch == a.micro_batch && checkpoint == a.checkpointed, ErrorCode::kInvalidArgument,
          "the model's activations are for micro-batches of {} sequences, checkpointing {}; "
          "asked for {}, checkpointing {}",
          a.micro_batch, a.checkpointed ? "on" : "off", micro_batch, checkpoint ? "on" : "off");
      return a;
    };
  }
  return d;
}

int64_t ModelDesc::num_frozen_params() const {
  int64_t n = 0;
  for (const auto& u : frozen)
    for (const FrozenParamDesc& p : u) n += p.numel;
  return n;
}

int64_t ModelDesc::num_params() const {
  int64_t n = 0;
  for (const auto& u : units)
    for (int64_t p : u) n += p;
  return n;
}

void PlanConfig::validate() const {
  engine.validate();
  ZS_CHECK(world >= 1 && world <= (1 << 20), ErrorCode::kInvalidArgument,
           "ranks {} is outside 1..{}", world, 1 << 20);
  ZS_CHECK(ranks_per_node >= 1 && ranks_per_node <= world && world % ranks_per_node == 0,
           ErrorCode::kInvalidArgument, "ranks per node {} must divide the {} ranks",
           ranks_per_node, world);
  ZS_CHECK(rank >= 0 && rank < world, ErrorCode::kInvalidArgument, "rank {} outside [0, {})", rank,
           world);
  ZS_CHECK(reserve_bytes >= 0, ErrorCode::kInvalidArgument, "reserve {} bytes < 0", reserve_bytes);
  ZS_CHECK(engine.shard_group_size <= world && world % std::max(engine.shard_group_size, 1) == 0,
           ErrorCode::kInvalidArgument,
           "shard group size {} does not divide the {} ranks (0 = all ranks)",
           engine.shard_group_size, world);
  ZS_CHECK(device == DeviceKind::kCpu || engine.optimizer.state_dtype == optim::StateDType::kF32,
           ErrorCode::kUnsupported,
           "optimizer.state_dtype {}: bf16 and int8 optimizer states are implemented on the CPU "
           "backend only",
           optim::state_dtype_name(engine.optimizer.state_dtype));
  const int64_t per_step = static_cast<int64_t>(world) * engine.micro_batches;
  ZS_CHECK(global_batch >= 0 && global_batch % per_step == 0, ErrorCode::kInvalidArgument,
           "batch {} must be a positive multiple of ranks x micro-batches = {}", global_batch,
           per_step);
}

int64_t MemoryPlan::bytes(MemCategory c) const {
  if (c == MemCategory::kActivations) return activations.total();
  if (c == MemCategory::kOther) return activations.pinned_host;
  return buffers.bytes(c);
}

int64_t MemoryPlan::model_states_bytes() const {
  int64_t b = 0;
  for (const UnitBufferPlan& u : buffers.units)
    b += u.params_bytes + u.grads_bytes + u.master_bytes + u.exp_avg_bytes + u.exp_avg_sq_bytes +
         u.frozen_bytes;
  return b;
}

int64_t MemoryPlan::device_bytes() const {
  return bytes(MemCategory::kParams) + bytes(MemCategory::kGrads) + bytes(MemCategory::kMaster) +
         bytes(MemCategory::kOptimizer) + bytes(MemCategory::kFrozen) +
         bytes(MemCategory::kActivations) + bytes(MemCategory::kCommBuffers) + reserve_bytes;
}

int64_t checkpoint_snapshot_bytes(const MemoryPlan& plan, const EngineConfig& engine) {
  const OptimizerConfig& o = engine.optimizer;
  const int64_t states =
      1 + (uses_adamw(o.kind) || o.sgd.momentum != 0.0f ? 1 : 0) + (uses_adamw(o.kind) ? 1 : 0);
  const int64_t units = static_cast<int64_t>(plan.buffers.units.size());
  const int64_t header = (64 + 16 * units + 63) / 64 * 64;
  int64_t numel = 0;
  for (const UnitBufferPlan& u : plan.buffers.units) numel += u.master_numel;
  return header + 4 * states * numel;
}

int64_t memory_tier_bytes(const MemoryPlan& plan, const EngineConfig& engine) {
  return 2 * checkpoint_snapshot_bytes(plan, engine);
}

MemoryPlan plan_memory(const ModelDesc& model, const PlanConfig& config) {
  config.validate();
  ZS_CHECK(!model.units.empty(), ErrorCode::kInvalidArgument, "the model has no units");
  ZS_CHECK(model.frozen.empty() || model.frozen.size() == model.units.size(),
           ErrorCode::kInvalidArgument, "frozen parameters for {} units, the model has {}",
           model.frozen.size(), model.units.size());
  for (size_t u = 0; u < model.names.size(); ++u)
    ZS_CHECK(
        model.names.size() == model.units.size() && model.names[u].size() == model.units[u].size(),
        ErrorCode::kInvalidArgument, "parameter names for {} units do not match the model's {}",
        model.names.size(), model.units.size());
  // Model states are split over one shard group ([Note: hybrid sharding]).
  const int group =
      config.engine.shard_group_size > 0 ? config.engine.shard_group_size : config.world;
  std::vector<GroupLayout> layouts;
  layouts.reserve(model.units.size());
  for (const auto& u : model.units)
    layouts.push_back(compute_group_layout(u, group, layout_align(config.engine)));
  const DType compute = config.engine.precision.param_dtype;
  std::vector<FrozenLayout> frozen;
  for (const auto& f : model.frozen) {
    frozen.push_back(compute_frozen_layout(f, config.engine.frozen.storage_or(compute), compute,
                                           group, config.engine.frozen.hands_int8()));
  }

  // [Note: Muon parameters]: by the engine's rule, from the units' names and shapes.
  MuonMatrices muon;
  if (config.engine.optimizer.kind == OptimizerKind::kMuon && !model.shapes.empty()) {
    ZS_CHECK(
        model.unit_names.size() == model.units.size() && model.shapes.size() == model.units.size(),
        ErrorCode::kInvalidArgument, "unit names and shapes for {} and {} units, the model has {}",
        model.unit_names.size(), model.shapes.size(), model.units.size());
    muon = muon_matrices(config.engine.optimizer, model.unit_names, model.shapes);
  }
  MemoryPlan p;
  p.buffers = plan_engine_buffers(layouts, frozen, config.engine, config.rank % group,
                                  /*on_device=*/config.device == DeviceKind::kCuda, config.world,
                                  model.ties, model.names, muon);
  p.num_frozen_params = model.num_frozen_params();
  p.world = config.world;
  p.ranks_per_node = config.ranks_per_node;
  p.stage = static_cast<int>(config.engine.stage);
  p.reserve_bytes = config.reserve_bytes;
  const int64_t P = static_cast<int64_t>(dtype_size(config.engine.precision.param_dtype));
  for (const GroupLayout& l : layouts) {
    p.num_params += l.numel;
    p.num_padded_params += l.padded_numel;
    p.params_shard_bytes += P * l.shard_numel;
  }
  p.params_full_bytes = P * p.num_padded_params;
  if (model.activations) {
    const int64_t per_step = static_cast<int64_t>(config.world) * config.engine.micro_batches;
    const int64_t batch = config.global_batch > 0 ? config.global_batch : per_step;
    p.activations = model.activations(batch / per_step, config.checkpoint_activations);
  }
  return p;
}

std::vector<FitCandidate> fit_configurations(const ModelDesc& model, const PlanConfig& base,
                                             int64_t budget_bytes) {
  const int64_t per_rank_batch =
      base.global_batch > 0 ? base.global_batch / base.world : base.engine.micro_batches;
  ZS_CHECK(base.global_batch % base.world == 0, ErrorCode::kInvalidArgument,
           "batch {} must divide by the {} ranks", base.global_batch, base.world);
  const bool adam = base.engine.optimizer.kind == OptimizerKind::kAdamW;
  std::vector<FitCandidate> out;
  for (int stage = 0; stage <= 3; ++stage) {
    for (int offload = 0; offload <= 1; ++offload) {
      if (offload && (stage == 0 || !adam)) continue;
      for (int ckpt = 0; ckpt <= (model.activations ? 1 : 0); ++ckpt) {
        for (int64_t mb = 1; mb <= per_rank_batch; ++mb) {
          if (per_rank_batch % mb != 0) continue;
          if (!model.activations && mb > 1) break;  // activations unknown: micro-batches moot
          PlanConfig c = base;
          c.engine.stage = zero_stage_from_int(stage);
          c.engine.offload.optimizer = offload != 0;
          c.checkpoint_activations = ckpt != 0;
          c.engine.micro_batches = static_cast<int>(mb);
          c.global_batch = per_rank_batch * base.world;
          MemoryPlan plan = plan_memory(model, c);
          if (plan.device_bytes() > budget_bytes) continue;
          // Relative step-time penalty: stage 3's extra all-gather (1.5x communication), the
          // recompute of checkpointing (one more forward, ~1/3 of a step), the host update and
          // transfers of offload, and smaller matrix products with more micro-batches.
          const double cost = (stage == 3 ? 0.5 : 0.02 * stage) + (ckpt ? 0.33 : 0.0) +
                              (offload ? 1.0 : 0.0) + 0.05 * std::log2(static_cast<double>(mb));
          out.push_back({stage, offload != 0, ckpt != 0, static_cast<int>(mb), cost, plan});
        }
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const FitCandidate& a, const FitCandidate& b) {
    return a.cost < b.cost || (a.cost == b.cost && a.plan.device_bytes() < b.plan.device_bytes());
  });
  return out;
}

}  // namespace zs
