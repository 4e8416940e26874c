// The engine: drives a training step through the units of a Model under a ZeRO stage.
//
// Each unit's parameters form one ParamGroup (runtime/param_group.h), the unit of communication;
// what the stage keeps resident and when it gathers or reduces is a ShardingPolicy
// (sharding/sharding_policy.h) fixed at construction; where the fp32 master and optimizer state
// live is an OptimizerStates placement (runtime/optimizer_states.h), also fixed. One step is, in
// functions of engine.cc (docs/engine.md, "One step"):
//   forward             per micro-batch, units in order: GatherSchedule::acquire (stage 3:
//                       wait for the unit's all-gather, start the next ones), compute, release
//   backward            units in reverse: ReduceSchedule::acquire (a lane's fp32 scratch),
//                       compute the gradient into it, ReduceSchedule::start (stages 2-3:
//                       reduce-scatter into the shard now; 0-1: add locally and reduce-scatter
//                       after the last micro-batch)
//   finish_reductions   ReduceSchedule::finish_all: every reduction in flight, oldest first
//                       (with hybrid sharding, then each shard's all-reduce across replicas)
//   gather_reduced_grads  stage 0: all-gather the reduced gradient
//   gradient_stats      finite check and global norm: one all-reduce
//   update              clip factor, then OptimizerStates::update per group, which writes the
//                       cast of the new master into the compute-dtype parameters (Muon: first
//                       its matrices, after an all-gather of their u, runtime/muon_update.h),
//                       and (stages 1-2) the re-gather of the replica from every rank's updated
//                       region
//
// Parameters are laid out per unit in flat groups (sharding/layout.h). All buffers are
// allocated in the constructor; step() allocates nothing.
//
// Collective: every public method except accessors must be called on every rank of `comm`, in
// the same order. Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "core/memory_tracker.h"
#include "runtime/engine_config.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"
#include "unit/unit.h"

namespace zs {

struct StepStats {
  int64_t step = 0;   // optimizer steps taken so far (skipped steps do not count)
  double loss = 0.0;  // mean over micro-batches and ranks
  float lr = 0.0f;
  float loss_scale = 1.0f;  // the scale used for this step
  double grad_norm = 0.0;   // global norm of the averaged, unscaled gradient (before clipping)
  bool skipped = false;     // non-finite gradient: no update
  // The first unit the backward reached (the last in model order) whose gradient was not finite:
  // a NaN made in one unit's backward flows into every unit before it.
  std::string nonfinite_unit;
  int consecutive_skips = 0;  // skipped steps in a row, this one included
};

// This rank's optimizer state for one unit: views of the fp32 shards (numel = shard_numel of
// the unit's layout; stage 0 holds the full group). Used by checkpoints and tests.
struct ShardExtent {
  int64_t begin = 0;  // first element of the padded group held here
  int64_t numel = 0;
};

// The most elements of a unit's state that Engine::shard_pieces puts in one piece by default:
// 16 Mi, so that one piece's decoded moments are 128 MiB (fp32 m and v).
inline constexpr int64_t kStatePieceNumel = int64_t{1} << 24;

struct UnitShardState {
  float* master = nullptr;
  float* exp_avg = nullptr;     // Adam m, or SGD momentum
  float* exp_avg_sq = nullptr;  // Adam v (null for SGD)
  int64_t begin = 0;            // first element of the padded group held here
  int64_t numel = 0;
};

// A unit's frozen byte group as gathered (Engine::gather_frozen_unit), with its records' layout.
struct FrozenUnitBytes {
  std::vector<uint8_t> bytes;
  std::vector<FrozenRecord> records;  // in the order of the unit's frozen parameters
  // Frozen parameter f as fp32 values into out (resized to its numel; a reused vector's capacity
  // is kept), decoded on up to `threads` OpenMP threads (0: the OpenMP default):
  // Engine::gather_frozen_param(unit, f) bit for bit, whatever the thread count. Not collective.
  void decode(size_t f, std::vector<float>& out, int threads = 1) const;
};

class DeviceOps;

class Engine {
 public:
  // Builds layouts, allocates every buffer, initialises parameters from their Init (identical for
  // every world size and stage). `tracker` receives the byte accounting (the process tracker when
  // null). Throws zs::Error for an invalid config, a model without units, a unit without
  // parameters, or a configuration that differs between ranks.
  //
  // `ops` is the device the engine's buffers live on and its element-wise work runs on
  // (device/device_ops.h); null means the CPU (cpu_device_ops()). `comm` must work on that
  // device's memory (MpiCommunicator for the CPU, NcclCommunicator ordered on the same stream as
  // the ops for CUDA), and the model's units must take parameter and gradient views in it
  // ([Note: device views] in unit/unit.h).
  Engine(Model& model, Communicator& comm, const EngineConfig& config,
         MemoryTracker* tracker = nullptr, DeviceOps* ops = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One optimizer step over config.micro_batches micro-batches. Throws zs::Error(kNonFinite) on
  // every rank when the loss is not finite or more than config.max_consecutive_skips steps in a
  // row had a non-finite gradient ([Note: non-finite policy] in engine_config.h); the
  // parameters are then those of the last applied step. Also throws it on every rank when the
  // update made a parameter non-finite; the parameters are then unusable.
  StepStats step();
  // Forward only over every unit with StepInfo::training = false (the model has loaded its
  // inputs); gathers parameters as the stage requires. For evaluation and generation.
  void forward();

  const EngineConfig& config() const { return config_; }
  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t step) { step_ = step; }  // for resume
  optim::LossScalerState loss_scaler_state() const;
  void restore_loss_scaler(const optim::LossScalerState& s);

  size_t num_units() const;
  // The unit's trainable parameters: layout(unit).params[p] is param_specs(unit)[p], and the
  // master, optimizer state, checkpoints and param_hash() cover these. The unit's frozen
  // parameters ([Note: frozen parameters] in unit/unit.h) are frozen_specs(unit), laid out by
  // frozen_layout(unit) (sharding/frozen_layout.h). Both lists keep the unit's order.
  const GroupLayout& layout(size_t unit) const;
  const std::vector<ParamSpec>& param_specs(size_t unit) const;
  const std::vector<ParamSpec>& frozen_specs(size_t unit) const;
  const FrozenLayout& frozen_layout(size_t unit) const;
  // On the CPU, and for an offloaded optimizer, the pointers address the state itself. On a device
  // engine without offload they address host copies made by this call; writes to them take
  // effect at the next refresh_params_from_master(), unless a step() came in between (the copies
  // are stale then, and are not uploaded). With bf16 or int8 optimizer states, exp_avg and
  // exp_avg_sq are such copies of the decoded moments (fp32), re-encoded by the refresh so that
  // the decoded values come back bit for bit ([Note: decoded state round trip]).
  UnitShardState shard_state(size_t unit);
  // The same for one piece of this rank's part (a shard_pieces entry): begin and numel are the
  // piece's, and only the piece's moments are decoded or copied, so that a save, a load or an
  // import that visits a unit piece by piece holds one piece's copies, not the unit's (the
  // 128,256 x 2048 embedding's int8 moments decode to 1.05 GB per rank at 2 ranks). Throws
  // zs::Error(kInvalidArgument) for a range outside this rank's part, or one that cuts an int8
  // moment block. A call replaces the unit's previous copies (release or refresh them first).
  UnitShardState shard_state(size_t unit, ShardExtent piece);
  // This rank's part of a unit's padded group, shard_state's begin and numel, without its copies.
  // Not collective.
  ShardExtent shard_extent(size_t unit);
  // shard_extent(unit) cut into consecutive pieces of at most max_numel elements (at least one
  // int8 block: a smaller value is raised to it), each boundary where shard_state(unit, piece)
  // accepts it; none when the part is empty. Not collective.
  std::vector<ShardExtent> shard_pieces(size_t unit, int64_t max_numel = kStatePieceNumel);
  // Ends a use of shard_state(unit)'s pointers: `written` uploads or re-encodes what was written
  // through them now (as refresh_params_from_master would; the compute-dtype parameters are still
  // refreshed by that call), then the host copies are freed. A save, an export or a load that
  // visits the units one at a time calls it after each, so that at most one unit's copies exist
  // (with int8 states at 1B scale, all of them are the size of the master twice over). Not
  // collective.
  void release_shard_state(size_t unit, bool written);
  // Not collective: throws zs::Error(kNonFinite) naming the unit, the element and `what` when
  // this rank's fp32 master holds a NaN or inf. Checkpoints and exports call it (agreed across
  // ranks) so that non-finite parameters are never written.
  void check_master_finite(std::string_view what);
  // After master weights were changed from outside (checkpoint load, import): recompute the
  // compute-dtype parameters from them on every rank. Collective.
  void refresh_params_from_master();

  const std::string& unit_name(size_t unit) const;

  // Hybrid sharding ([Note: hybrid sharding] in runtime/engine_config.h): the ranks of this
  // rank's shard group (all ranks without it), this rank's place in it (what layout(u)'s shard
  // functions take), and which shard group it is in (0 without it).
  int shard_group_size() const;
  int shard_group_rank() const;
  int replica_index() const;
  // The communicators the parameter groups use, for their byte counters: the shard group's (the
  // engine's `comm` itself without hybrid sharding) and the replica group's (null without). Set-up
  // and the step's statistics (one small all-reduce) go over `comm`.
  Communicator& shard_communicator();
  Communicator* replica_communicator();
  // ZeRO++ communicators ([Note: node layout] in engine_config.h), for their byte counters; null
  // when the switch is off. qgZ: the ranks of this rank's node (local-rank order) and the ranks
  // with its local rank (one per node, node order). hpZ: its group of zero_hpz_partition_size
  // consecutive ranks.
  Communicator* node_local_communicator();
  Communicator* cross_node_communicator();
  Communicator* hpz_communicator();

  int64_t num_params() const;         // Psi: trainable parameter elements, without padding
  int64_t num_frozen_params() const;  // frozen parameter elements
  int64_t num_padded_params() const;  // with padding
  // The bytes the engine allocated for a category (runtime/buffer_plan.h): model states and
  // communication buffers, not the model's activations. Equal to what the tracker shows for
  // the engine's own buffers.
  int64_t planned_bytes(MemCategory c) const;
  // The share of the model-state bytes that is padding ([Note: padding]).
  int64_t padding_bytes() const;
  MemoryTracker& tracker() { return *tracker_; }

  // Collective: a 64-bit hash (xxHash64, hex via param_hash_hex) of the fp32 master parameters in
  // canonical order (units, parameters, elements; no padding), the same on every rank.
  uint64_t param_hash();
  // Collective: the full fp32 master values of one unit's parameter, on every rank.
  std::vector<float> gather_master_param(size_t unit, size_t param);
  // Collective: the whole padded fp32 master group of one unit, on every rank.
  std::vector<float> gather_master_group(size_t unit);

  // Collective: frozen parameter f of a unit as fp32 values (int8: q * scale), on every rank.
  // Gathers the unit's whole frozen byte group: to read several of a unit's frozen parameters,
  // gather_frozen_unit gathers it once.
  std::vector<float> gather_frozen_param(size_t unit, size_t f);
  // Collective: a unit's whole frozen byte group, gathered once, for reading several of its
  // frozen parameters one at a time (an export: FrozenUnitBytes::decode).
  FrozenUnitBytes gather_frozen_unit(size_t unit);
  // Sets frozen parameter f of a unit from its full fp32 values (an imported base), encoded as
  // its storage says; this rank keeps its part. Not collective, but every rank must pass the same
  // values. Takes effect at the next use of the unit.
  void set_frozen_param(size_t unit, size_t f, const float* values);
  // The elements of frozen parameter f of a unit that set_frozen_param_range asks this rank for:
  // all of them when frozen parameters are not sharded; when they are, those its stored bytes
  // depend on (sharding/frozen_layout.h), except that of an int8 matrix only the whole rows whose
  // values it stores (their row scales, which come first in the record, are exchanged,
  // ParamGroup::set_frozen_collective); none (count 0) when this rank stores no byte of it, or
  // only scales. Not collective.
  ElementRange frozen_param_needs(size_t unit, size_t f) const;
  // Sets this rank's stored bytes of frozen parameter f from the fp32 values of elements
  // [first, first + count), which must cover frozen_param_needs (else zs::Error(kInvalidArgument),
  // thrown before any exchange: the caller's error); the bytes equal set_frozen_param's from the
  // full values. Encoded on up to `threads` OpenMP threads (0: the OpenMP default). Collective
  // when frozen parameters are sharded over more than one rank: every rank calls it for every
  // frozen parameter it sets, in the same order, also one that needs nothing of it (count 0; an
  // int8 matrix's row scales are exchanged by one all-reduce). An import streams a base this way,
  // each rank reading only the rows whose values it stores. Takes effect at the next use of the
  // unit.
  void set_frozen_param_range(size_t unit, size_t f, int64_t first, int64_t count,
                              const float* values, int threads = 1);
  // Collective: xxHash64 of the frozen parameters' stored bytes (every record, units and
  // parameters in order, no padding), the same on every rank: identifies a base and shows it
  // unchanged. 0 bytes hashed when nothing is frozen. Computed once and kept until a
  // set_frozen_param* call (the only writers of frozen bytes) on any rank.
  uint64_t frozen_hash();

 private:
  struct Impl;
  EngineConfig config_;
  MemoryTracker* tracker_;
  int64_t step_ = 0;
  std::unique_ptr<Impl> impl_;
};

std::string param_hash_hex(uint64_t hash);

}  // namespace zs
