// ParamGroup: one unit's parameters and gradients as the unit of communication.
//
// A group owns the unit's compute-dtype parameter buffer and its gradient buffer, laid out flat
// (sharding/layout.h), and knows what its ShardingPolicy keeps resident. Communication happens in
// start/finish pairs whose transitions are asserted:
//
//   parameters (policy.shard_params)   sharded --start_gather--> gathering --wait_gather-->
//                                      gathered --release--> sharded
//   parameters (resident replica)      always gathered; views() are valid at any time
//   gradient                           clear --start_reduce--> reducing --finish_reduce--> reduced
//                                      (a full-buffer policy stays accumulating until the last
//                                      micro-batch: start_reduce only folds the gradient in)
//
// Tied parameters ([Note: tied parameters] in unit/unit.h) are another group's: a borrower group
// holds no bytes for them; its views and gradient views carry a place for each, which the engine
// fills (set_tied_view, set_tied_grad) with the owner's.
//
// Frozen parameters ([Note: frozen parameters] in unit/unit.h) ride along: the group also
// owns their encoded bytes (sharding/frozen_layout.h), sharded or resident by the same
// policy.shard_params, gathered into the same slot after the trainable parameters, and converted
// into the compute dtype (a buffer the engine shares between groups) when the group is acquired
// for compute. They have no gradient: the gradient buffers, reductions and the optimizer see
// only the trainable parameters, which is what layout() and specs() describe.
//
// How the bytes move is the group's paths' ([Note: communication paths] in runtime/comm_path.h):
// a GatherPath for the sharded parameters and a ReducePath for the gradient, chosen once when the
// group is made. The transient buffers a reduction uses (the fp32 gradient the unit wrote, the
// cast copy on the wire, the received shard of a later micro-batch) belong to a ReduceLane that
// ReduceSchedule lends for the duration of one reduction; a gather slot likewise comes from
// GatherSchedule.
//
// Collective: start_gather, start_reduce, start_gather_reduced_grads and
// start_gather_updated_params start collectives; every rank must call them in the same order.
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "device/device_ops.h"
#include "runtime/gather_path.h"
#include "runtime/quantized_gather.h"
#include "runtime/reduce_path.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"
#include "sharding/sharding_policy.h"
#include "unit/unit.h"

namespace zs {

class HostStaging;  // runtime/host_staging.h

// A group's two paths, made and connected by the engine (runtime/gather_path.h,
// runtime/reduce_path.h).
struct GroupPaths {
  std::unique_ptr<GatherPath> gather;
  std::unique_ptr<ReducePath> reduce;
};

class ParamGroup {
 public:
  enum class ParamState { kSharded, kGathering, kGathered };
  enum class GradState { kClear, kAccumulating, kReducing, kReduced };

  // `params` and `grads` are sized by plan_engine_buffers(): full or shard as the policy says.
  // All parameters trainable. The paths are the plain ones of the policy's stage (one
  // micro-batch), over `comm`.
  ParamGroup(int index, std::string name, std::vector<ParamSpec> specs, GroupLayout layout,
             const ShardingPolicy& policy, DType param_dtype, DType grad_dtype, int rank,
             Buffer params, Buffer grads, Communicator& comm, DeviceOps& ops);
  // `unit_specs` are the unit's parameters in its order, trainable and frozen; `layout` covers
  // the trainable ones in that order, `frozen` the frozen ones. `frozen_store` holds the frozen
  // byte group (or this rank's shard of it); `convert` addresses frozen.convert_numel elements
  // of the compute dtype, which the group may overwrite whenever it is acquired. `paths`: made
  // for this layout and connected (the reduce path to `grads`); empty: the plain ones of the
  // policy's stage over `comm`.
  ParamGroup(int index, std::string name, std::vector<ParamSpec> unit_specs, GroupLayout layout,
             FrozenLayout frozen, const ShardingPolicy& policy, DType param_dtype, DType grad_dtype,
             int rank, Buffer params, Buffer grads, Buffer frozen_store, void* convert,
             Communicator& comm, DeviceOps& ops, GroupPaths paths = {});
  ParamGroup(ParamGroup&&) = default;

  int index() const { return index_; }
  const std::string& name() const { return name_; }
  // The trainable parameters, in the unit's order; layout().params[p] is specs()[p].
  const std::vector<ParamSpec>& specs() const { return specs_; }
  // Index in the unit's param_specs() of trainable parameter p (for the initial draws).
  int spec_index(size_t p) const { return trainable_index_[p]; }
  const GroupLayout& layout() const { return layout_; }
  // The frozen parameters, in the unit's order; frozen_layout().records[f] is frozen_specs()[f].
  const std::vector<ParamSpec>& frozen_specs() const { return frozen_specs_; }
  int frozen_spec_index(size_t f) const { return frozen_index_[f]; }
  const FrozenLayout& frozen_layout() const { return frozen_; }
  // The tied parameters ([Note: tied parameters]), in the unit's order, and their indices in
  // the unit's param_specs().
  const std::vector<ParamSpec>& tied_specs() const { return tied_specs_; }
  int tied_spec_index(size_t t) const { return tied_index_[t]; }
  // Tied parameter t's view from now on: the owner's values `v` (its spec stays the
  // borrower's). Call after acquiring the group and before the unit computes.
  void set_tied_view(size_t t, const ParamView& v);
  // Where the backward writes tied parameter t's gradient (fp32, its numel; null when the owner
  // is frozen). Set before the gradient views are made (ReduceSchedule).
  void set_tied_grad(size_t t, float* grad) { tied_grads_.at(t) = grad; }
  float* tied_grad(size_t t) const { return tied_grads_[t]; }
  // Bytes of a gather slot this group needs: the trainable parameters, then (64-byte aligned)
  // the frozen byte group.
  int64_t slot_bytes() const;
  // The group's paths (names, planning queries).
  const GatherPath& gather_path() const { return *gather_; }
  const ReducePath& reduce_path() const { return *reduce_; }
  // The parameters may have changed since the last gather (a new step or evaluation:
  // GatherSchedule::begin); the gather path forgets what it kept (hpZ's secondary shard).
  void params_changed() { gather_->invalidate(); }
  ParamState param_state() const { return param_state_; }
  GradState grad_state() const { return grad_state_; }

  // --- Parameters
  // Resident replica: the parameter views, valid until another group is acquired (frozen
  // parameters stored in another dtype are converted into the shared buffer here).
  std::span<const ParamView> views();
  // Sharded parameters: starts the all-gather of this rank's shard into gather slot `slot`
  // (GatherSchedule's buffer `slot_data`). sharded -> gathering.
  void start_gather(int slot, void* slot_data);
  // gathering -> gathered: waits for the all-gather; the views address the slot.
  std::span<const ParamView> wait_gather();
  // Gathered into a slot (held across visits by GatherSchedule): the views, no wait.
  std::span<const ParamView> gathered_views() const;
  // gathered -> sharded; returns the slot to give back.
  int release();
  // The slot this group is gathered (or being gathered) into; -1 when sharded.
  int slot() const { return slot_; }
  // --- Frozen parameters (not collective unless said)
  // Writes frozen parameter f from its full fp32 values: this rank keeps the bytes of its shard
  // (or all of them), encoded as the record says.
  void set_frozen(size_t f, const float* values);
  // The same from a source of the values (sharding/frozen_layout.h), asked only for the elements
  // this rank's stored bytes depend on (int8: the rows its range overlaps), encoded on up to
  // `threads` threads.
  void set_frozen(size_t f, const FrozenValues& values, int threads);
  // As set_frozen from a source, asking it for fewer values: collective over the group's
  // communicator when the frozen parameters are sharded (every rank calls it for every f it sets,
  // in the same order, also a rank that stores no byte of f). An int8 matrix's row scales come
  // first in its record, so the rank storing them would otherwise draw (or read) every row of the
  // record; here each rank asks only for the rows whose values it stores (frozen_reads), and the
  // scales are exchanged (an all-reduce of the record's scales by max: each row's scale is
  // computed from the whole row by every rank that asks for it, 0 elsewhere). The bytes equal
  // set_frozen's. Used by the random initialisation and the streaming import
  // (Engine::set_frozen_param_range).
  void set_frozen_collective(size_t f, const FrozenValues& values, int threads);
  // The elements of frozen parameter f that set_frozen asks its source for on this rank
  // (frozen_elements_of_bytes of the record's bytes this rank stores); empty when it stores none.
  ElementRange frozen_needs(size_t f) const;
  // The elements set_frozen_collective asks its source for on this rank: for an int8 matrix whose
  // scales are exchanged (sharded, more than one rank), the rows whose values this rank stores
  // (empty when it stores only scales, or nothing); else frozen_needs(f).
  ElementRange frozen_reads(size_t f) const;
  // Collective when the frozen parameters are sharded: the whole padded frozen byte group, on
  // every rank, in host memory (gathered through `staging`).
  std::vector<uint8_t> gather_frozen_bytes(HostStaging& staging);

  // The compute-dtype parameter at element `e` of the padded group in this rank's buffer: the
  // replica holds every element, a shard [shard_begin, shard_begin + shard_numel).
  void* param_at(int64_t e);
  // Starts the all-gather that completes the resident replica from every rank's updated region
  // (policy.gather_updated_params()); null otherwise.
  WorkHandle start_gather_updated_params();

  // --- Gradient
  // A new step: the gradient buffer's contents are dead. Any state but reducing -> clear.
  void begin_step();
  // The unit's backward for micro-batch `micro` of `micro_batches` wrote its fp32 gradient to
  // lane.scratch: the reduce path folds it in (clear/accumulating -> accumulating) or starts its
  // reduction (-> reducing). `lane` must stay untouched until finish_reduce() when lane_busy()
  // says so.
  void start_reduce(const ReduceLane& lane, int micro, int micro_batches);
  // True while a reduction started by start_reduce is in flight and uses its lane's buffers.
  bool lane_busy() const { return grad_state_ == GradState::kReducing && reduce_->holds_lane(); }
  bool reducing() const { return grad_state_ == GradState::kReducing; }
  // reducing -> reduced (the step's last reduction) or accumulating: waits, and adds a later
  // micro-batch's received shard into the gradient shard. Returns true when the gradient is
  // reduced over this group's communicator for this step (with hybrid sharding, the replica
  // stage is ReduceSchedule's).
  bool finish_reduce();
  // reducing -> clear without using the result: waits for the reduction in flight (an engine
  // unwinding after an error). No-op in any other state.
  void abandon_reduce();
  // The dtype of the gradient buffer and of its reductions.
  DType grad_dtype() const { return G_; }
  // Starts the all-gather of the whole reduced gradient (policy.gather_reduced_grads()); null
  // otherwise. Requires reduced.
  WorkHandle start_gather_reduced_grads();
  // This rank's reduced gradient shard (grad dtype, layout().shard_numel elements).
  const void* grad_shard() const;
  // The gradient the update reads: the whole group (gather_reduced_grads) or this rank's shard.
  const void* update_grad() const;

 private:
  void stored_overlap(const FrozenRecord& r, int64_t& lo, int64_t& b, int64_t& e) const;
  // set_frozen_collective exchanges record r's scales instead of reading their rows.
  bool exchanges_scales(const FrozenRecord& r) const;
  int index_;
  std::string name_;
  void build_views();
  void convert_frozen(const void* frozen_bytes);

  std::vector<ParamSpec> specs_;         // trainable
  std::vector<ParamSpec> frozen_specs_;  // frozen
  std::vector<ParamSpec> tied_specs_;    // another group's
  std::vector<int> trainable_index_, frozen_index_, tied_index_;
  std::vector<float*> tied_grads_;
  // Per unit parameter: trainable p as p, frozen f as -(f + 1), tied as kTiedCode.
  static constexpr int kTiedCode = -(1 << 30);
  std::vector<int> unit_order_;
  GroupLayout layout_;
  FrozenLayout frozen_;
  std::unique_ptr<GatherPath> gather_;
  std::unique_ptr<ReducePath> reduce_;
  GatherSlotLayout slot_layout_;  // where the frozen bytes and the path's area are in a slot
  ShardingPolicy policy_;
  DType P_, G_;
  int rank_;
  Buffer params_, grads_, frozen_store_;
  void* convert_ = nullptr;
  bool any_convert_ = false;
  Communicator& comm_;
  DeviceOps& ops_;
  // Flight-recorder labels of this group's collectives (collectives/flight_recorder.h), made
  // once: "<name> gather", "<name> reduce", "<name> grad gather", "<name> param gather".
  std::string tag_gather_, tag_reduce_, tag_grad_gather_, tag_param_gather_, tag_frozen_gather_;
  std::vector<ParamView> resident_views_;
  std::vector<ParamView> slot_views_;  // rebuilt when the group is gathered into a slot
  ParamState param_state_;
  GradState grad_state_ = GradState::kClear;
  int slot_ = -1;
  void* slot_data_ = nullptr;
  WorkHandle gather_work_;
  WorkHandle frozen_work_;
  WorkHandle reduce_work_;
  bool pending_last_ = false;  // the reduction in flight is the step's last
};

}  // namespace zs
