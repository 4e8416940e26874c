// The memory plan: per-rank bytes by category for a model and a training configuration, without
// allocating anything. Model states and communication buffers come from plan_engine_buffers()
// (runtime/buffer_plan.h), the function the engine allocates from, over the same
// compute_group_layout() the engine builds: for any configuration the engine's tracker shows
// exactly these bytes. The runtime knows no model: a model's activations are what the model
// reports (ActivationPlan, unit/activation_plan.h), asked for the micro-batch and
// checkpointing of each configuration. zeroshard's GPT sizes its own in nn/gpt_activations.h
// (the function its constructors allocate from) and names transformer shapes in
// models/gpt/transformer_shapes.h; zs_plan (apps/zs_plan/zs_plan.cc) combines the two.
// docs/memory.md explains the arithmetic.
//
// Pure functions of their arguments (and of the model's activation function); thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "runtime/buffer_plan.h"
#include "runtime/engine_config.h"
#include "sharding/frozen_layout.h"
#include "unit/activation_plan.h"
#include "unit/unit.h"

namespace zs {

// A plausible unit list for a bare parameter count: L units of about n / L parameters (one flat
// parameter each) with L from a GPT-like aspect ratio (12 L C^2 = n, C = 128 L), at least 1.
// Throws zs::Error(kInvalidArgument) for n < 1.
std::vector<std::vector<int64_t>> units_for_param_count(int64_t n);

// A model's activations at `micro_batch` sequences per rank per micro-batch, with or without
// activation checkpointing. The model's own settings (its compute dtype, its device, its GEMM
// path) are the function's business; it may throw zs::Error for a size it cannot plan.
using ActivationFn = std::function<ActivationPlan(int64_t micro_batch, bool checkpoint)>;

struct ModelDesc {
  std::vector<std::vector<int64_t>> units;  // trainable parameter numels per unit, model order
  // Their names ("unit.param", as the engine names them), parallel to `units`: what
  // OptimizerConfig::state_fp32 matches. Empty: unnamed (a bare parameter count), and then
  // state_fp32 patterns match nothing.
  std::vector<std::vector<std::string>> names;
  // The units' names and their trainable parameters' shapes (parallel to `units`), which decide
  // the Muon matrices ([Note: Muon parameters] in runtime/engine_config.h). Empty: unknown (a bare
  // parameter count), and then Muon updates nothing: every parameter is planned as AdamW's.
  std::vector<std::string> unit_names;
  std::vector<std::vector<std::vector<int64_t>>> shapes;
  // Frozen parameters per unit ([Note: frozen parameters] in unit/unit.h): empty (none), or
  // one list per unit, stored as EngineConfig::frozen says.
  std::vector<std::vector<FrozenParamDesc>> frozen;
  // Tied parameters ([Note: tied parameters] in unit/unit.h): not in `units` or `frozen` (they
  // are their owners'); their gradient buffers, held gather slots and owner conversion buffers.
  std::vector<TiedParam> ties;
  // Empty: activations are not counted (0), and fit_configurations() varies neither
  // checkpointing nor the micro-batch count.
  ActivationFn activations;

  static ModelDesc from_units(std::vector<std::vector<int64_t>> units,
                              ActivationFn activations = {});
  static ModelDesc from_param_count(int64_t n);
  // A built model: each unit's parameter sizes (param_specs()) and the model's activation_plan()
  // (unit/unit.h), which holds for the micro-batch and checkpointing the model was built with:
  // asking for others throws zs::Error(kInvalidArgument). No activations when the model does not
  // count them.
  static ModelDesc from_model(Model& model);
  int64_t num_params() const;  // trainable
  int64_t num_frozen_params() const;
};

struct PlanConfig {
  // Stage, dtypes, optimizer, micro-batches, prefetch, offload, align: as the engine gets them.
  EngineConfig engine;
  int world = 1;           // ranks
  int ranks_per_node = 1;  // reported only: per-rank bytes do not depend on it
  // Sequences per optimizer step over all ranks; must divide by world * micro_batches.
  // 0 = one sequence per rank and micro-batch.
  int64_t global_batch = 0;
  bool checkpoint_activations = false;
  int64_t reserve_bytes = 0;  // per-device framework reserve (CUDA context, library workspaces)
  int rank = 0;               // which shard; sizes do not depend on it
  // Where the engine runs. kCuda: on a GPU (plan_engine_buffers' on_device: a device control
  // buffer, and pinned host staging with offload). The model's activations on that device are
  // the ModelDesc's.
  DeviceKind device = DeviceKind::kCpu;

  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
};

struct MemoryPlan {
  BufferPlan buffers;          // what the engine allocates (model states, comm buffers)
  ActivationPlan activations;  // the model's, for this configuration's micro-batch
  int world = 1;
  int ranks_per_node = 1;
  int stage = 0;
  int64_t num_params = 0;          // Psi, no padding
  int64_t num_padded_params = 0;   // sum of the units' padded group sizes
  int64_t params_full_bytes = 0;   // P * padded Psi: one full replica in the compute dtype
  int64_t params_shard_bytes = 0;  // P * sum of shard sizes: what stage 3 keeps
  int64_t num_frozen_params = 0;   // frozen elements, no padding
  int64_t reserve_bytes = 0;

  // The tracker's categories: kParams, kGrads, kMaster, kOptimizer, kFrozen (device-resident),
  // kActivations, kCommBuffers, kHostOffload (host), kOther (activations.pinned_host: the
  // model's pinned host buffers).
  int64_t bytes(MemCategory c) const;
  // Parameters, gradients, master weights, optimizer states and frozen parameters, wherever they
  // live (host included).
  int64_t model_states_bytes() const;
  int64_t padding_bytes() const { return buffers.padding_bytes(); }
  int64_t host_bytes() const { return bytes(MemCategory::kHostOffload); }
  // Everything on the device: model states held there, activations, comm buffers, reserve.
  int64_t device_bytes() const;
};

// The host snapshot of an asynchronous checkpoint save (--save-async), per rank: the bytes of the
// rank's shard file (checkpoint/checkpoint_format.h: a header of 64 + 16 per unit rounded up to
// 64, then its fp32 master and each optimizer state as fp32, whatever their storage). The largest
// rank's (rank 0: at stage 0 it alone writes). Counted by zs_plan --save-async and zs_train's
// memory check, apart from the tracker's categories.
int64_t checkpoint_snapshot_bytes(const MemoryPlan& plan, const EngineConfig& engine);

// The memory tier's files per rank (--save-memory-every: checkpoints in a RAM-backed directory,
// checkpoint/memory_tier.h): two shard files, the newest checkpoint and, during a save, the one
// it replaces (the manifest is a few KiB and not counted).
int64_t memory_tier_bytes(const MemoryPlan& plan, const EngineConfig& engine);

// Throws zs::Error(kInvalidArgument) for an invalid description or configuration, and what the
// model's activation function throws.
MemoryPlan plan_memory(const ModelDesc& model, const PlanConfig& config);

// One configuration that fits a per-device budget, for `zs_plan --fit`.
struct FitCandidate {
  int stage = 0;
  bool offload = false;
  bool checkpoint = false;
  int micro_batches = 1;
  double cost = 0.0;  // relative step-time penalty, lower is cheaper (docs/memory.md)
  MemoryPlan plan;
};

// Every (stage 0-3, offload on/off where valid, checkpointing on/off, micro-batches dividing the
// per-rank batch) whose device_bytes() <= budget, cheapest first. `base` supplies the rest.
// Checkpointing and micro-batch counts are tried only for a model with activations.
std::vector<FitCandidate> fit_configurations(const ModelDesc& model, const PlanConfig& base,
                                             int64_t budget_bytes);

}  // namespace zs
