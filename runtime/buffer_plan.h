// What the engine allocates, as a pure function of the layouts and the configuration. The engine
// allocates exactly this plan, and the memory planner (planner/memory_plan.h) reports it, so the
// two agree to the byte by construction.
//
// Per unit (Psi_u = padded group elements, S_u = shard elements, P/G = compute/gradient dtype
// sizes):
//   params     P * Psi_u (stages 0-2: full replica)   or P * S_u (stage 3); with hpZ ([Note:
//              hpZ] in runtime/engine_config.h, K = zeropp.hpz_partition_size) also the secondary
//              shard, P * Psi_u / K (gather_kept_bytes: the gather path's, runtime/gather_path.h)
//   grads      G * Psi_u (stages 0-1: full buffer)    or G * S_u (stages 2-3)
//              with world_invariant and k > 1 micro-batches also log2(k) fp32 partial sums of
//              the reduced shard, 4 * log2(k) * S_u (reduce_kept_bytes: the reduce path's,
//              runtime/reduce_path.h; runtime/micro_batch_tree.h)
//   master     4 * Psi_u (stage 0) or 4 * S_u; none when the compute dtype is fp32 and the
//              optimizer is not offloaded (the parameters are their own master)
//   exp_avg    4 * (master elements); exp_avg_sq the same for AdamW, none for SGD. With bf16 or
//              int8 AdamW states, each is moment_capacity() instead: parameter elements
//              only, 4 (fp32-kept: small or named), 2 (bf16) or 1 + 4 per block (int8) bytes each,
//              the largest over the shard group's ranks ([Note: optimizer state storage] in
//              runtime/state_storage.h)
//              With Muon ([Note: Muon parameters] in runtime/engine_config.h) exp_avg holds every
//              element (Muon's momentum or AdamW's m) and exp_avg_sq only the AdamW parameters'
//              elements of the state, 4 bytes each, the largest over the shard group's ranks
// Master and optimizer state are counted under kHostOffload when offloaded.
// Shared transient buffers (kCommBuffers), sized for the largest unit; the reduce lanes hold what
// the units' reduce paths ask for (ReducePath::lane_needs(), runtime/reduce_path.h):
//   gradient scratch: fp32 full unit gradient the units write into; 2 in stages 2-3 with fp32
//     gradients (one computes while the other is being reduced), else 1
//   send buffers: 2 x G * max Psi_u in stages 2-3 when G is not fp32 (the cast gradient in flight)
//   receive buffers: 2 x G * max S_u in stages 2-3 with micro_batches > 1 (reduced micro-batch
//     gradient before it is added to the shard)
//   with qgZ ([Note: quantized gradients] in runtime/quantized_reduce.h), stages 2-3: one
//     gradient scratch and no send buffers, and 2 lane buffers of the largest unit's
//     QuantizedReduceLayout::bytes (the int8 chunks sent and received, the fp32 node partials)
//   gather slots: (prefetch + 1) x max over units of the unit's slot in stage 3: P * Psi_u, or,
//     for a unit with frozen parameters, round64(P * Psi_u) + its frozen byte group F_u; with qwZ
//     ([Note: quantized weights]) round64 of that + the gathered int8 chunks, Psi_u + 4 Psi_u / B
//     (gather_slot_layout() in runtime/quantized_gather.h)
//   frozen conversion: P * max over units of the frozen elements stored in another dtype
//     (FrozenLayout::convert_numel): the compute-dtype values a unit sees, rewritten per use
//   Muon (runtime/muon_update.h): the momentum-updated u of the largest unit with Muon matrices,
//     4 * Psi_u (each rank's shard, then all-gathered in place), and the Newton-Schulz buffers of
//     the largest matrix, 4 * (rows * cols + newton_schulz_workspace(rows, cols)) (the result and
//     the iteration's workspace, optim/newton_schulz.h)
// Frozen parameters (sharding/frozen_layout.h; Psi_u above counts trainable elements only), per
// unit, under kFrozen: F_u bytes (stages 0-2: resident) or F_u / world (stage 3: a shard), where
// F_u is the padded byte group of the unit's encoded records. No gradient, master or optimizer
// state.
// Tied parameters ([Note: tied parameters] in unit/unit.h; none in the layouts: they are the
// owner's), under kCommBuffers:
//   tied gradient: 4 * numel per tied parameter whose owner is trainable (the borrower's fp32
//     contribution, kept until the owner's backward)
//   held gather slots: in stage 3, one more gather slot per owner unit (held from the owner's
//     forward to its backward)
//   owner conversion: an owner unit with frozen parameters stored in another dtype converts them
//     into a buffer of its own, P * its FrozenLayout::convert_numel, so that the values stay
//     valid while the borrower computes; the shared conversion buffer is sized over the others
// Device engines (CUDA) with an offloaded optimizer also stage each unit's gradient shard and
// updated parameter shard in page-locked host memory: (G + P) * S_u per unit, 64-byte aligned
// spans, under kHostOffload (host_staging_bytes). The CPU backend reads and writes the shards in
// place and stages nothing. Device engines also hold one control buffer in device memory for the
// host-side collectives (the set-up agreement all-gather, 8 * world bytes; the step's loss, norm
// and flags all-reduce, 8 * (2 + units) bytes): the larger of the two, under kCommBuffers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_tracker.h"
#include "runtime/engine_config.h"
#include "runtime/state_storage.h"
#include "runtime/tied_params.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"
#include "unit/unit.h"

namespace zs {

// [Note: Muon parameters] in runtime/engine_config.h: the matrices Muon updates, per unit, one
// entry per trainable parameter in layout order: its rows and columns, or {0, 0} for a parameter
// AdamW updates. Empty (or empty units): none.
struct MuonMatrix {
  int64_t rows = 0, cols = 0;
  bool muon() const { return rows > 0; }
};
using MuonMatrices = std::vector<std::vector<MuonMatrix>>;
// By muon_param(): `unit_names` and each unit's trainable, untied parameter shapes in layout
// order. Empty unless c.kind is kMuon.
MuonMatrices muon_matrices(const OptimizerConfig& c, const std::vector<std::string>& unit_names,
                           const std::vector<std::vector<std::vector<int64_t>>>& shapes);

struct UnitBufferPlan {
  int64_t params_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t master_bytes = 0;  // 0 when the parameters are their own master
  int64_t exp_avg_bytes = 0;
  int64_t exp_avg_sq_bytes = 0;
  int64_t frozen_bytes = 0;       // kFrozen: the frozen byte group or this rank's shard of it
  int64_t own_convert_bytes = 0;  // kCommBuffers: an owner unit's conversion buffer (see above)
  // What the unit's paths keep besides its buffers ([Note: communication paths]): the gather
  // path's under kParams (hpZ's secondary shard), the reduce path's under kGrads (the
  // micro-batch tree's partial sums); see above. 0 when its path keeps nothing.
  int64_t gather_kept_bytes = 0;
  int64_t reduce_kept_bytes = 0;
  MemCategory master_category = MemCategory::kMaster;
  MemCategory optimizer_category = MemCategory::kOptimizer;
  int64_t master_begin = 0;  // first padded-group element of the fp32 master held here
  int64_t master_numel = 0;
  // Narrow AdamW states: where each master segment's moments are, and which dtype each
  // parameter's moments got (the record of param_state_dtype()); empty (fp32) otherwise.
  StateStorage states;
};

struct BufferPlan {
  std::vector<UnitBufferPlan> units;
  int64_t max_padded_numel = 0;
  int64_t max_shard_numel = 0;
  int grad_scratch_count = 0;
  int64_t grad_scratch_bytes = 0;  // each
  int send_count = 0;
  int64_t send_bytes = 0;
  int recv_count = 0;
  int64_t recv_bytes = 0;
  int lanes = 1;            // reduce lanes (runtime/reduce_schedule.h)
  int lane_area_count = 0;  // the reduce path's own lane buffers (qgZ's chunks)
  int64_t lane_area_bytes = 0;
  std::string lane_area_label;  // what they hold, for listings; empty when none
  int gather_count = 0;
  int64_t gather_bytes = 0;
  int64_t convert_bytes = 0;       // frozen conversion buffer (kCommBuffers); 0 when none
  int64_t tied_grad_bytes = 0;     // all tied gradient buffers (kCommBuffers)
  int held_slots = 0;              // of gather_count: the owners' held slots
  int64_t host_staging_bytes = 0;  // device engines with offload only (see above)
  int64_t ctrl_bytes = 0;          // device engines only (see above)
  int64_t muon_u_bytes = 0;        // Muon's gathered u (kCommBuffers); 0 without Muon matrices
  int64_t muon_ns_bytes = 0;       // Muon's Newton-Schulz result and workspace (kCommBuffers)

  // Bytes per category of everything above.
  int64_t bytes(MemCategory c) const;
  // Padding share of the model-state bytes (params, grads, master, optimizer state).
  int64_t padding_bytes() const;
  int64_t padding_bytes_ = 0;
};

// `rank` selects which shard the master covers (its begin); sizes do not depend on it.
// `on_device`: the engine runs on a device the host cannot address (CUDA). `world`: the ranks of
// the job when they are more than the layouts' (hybrid sharding: layouts span one shard group);
// 0 = the layouts' world. Only the device control buffer depends on it.
// How a frozen parameter is laid out: a matrix (2-D) has rows = its first dimension (int8
// storage gives it one scale per row); every other shape rows = 0.
inline FrozenParamDesc frozen_param_desc(const ParamSpec& p) {
  return {p.numel(), p.shape.size() == 2 ? p.shape[0] : 0, p.accepts_int8};
}

// `frozen` is empty (no frozen parameters) or holds one FrozenLayout per unit; `ties` are the
// model's tied parameters (resolve_tied_params). `names`: each unit's trainable parameters as
// "unit.param" in layout order, which cfg.optimizer.state_fp32 matches (param_state_dtype());
// empty: unnamed. Throws zs::Error(kInvalidArgument) for a state_fp32 pattern that matches none
// (check_state_fp32_patterns()). `muon`: the Muon matrices (muon_matrices()), empty without.
BufferPlan plan_engine_buffers(const std::vector<GroupLayout>& layouts,
                               const std::vector<FrozenLayout>& frozen, const EngineConfig& cfg,
                               int rank = 0, bool on_device = false, int world = 0,
                               const std::vector<TiedParam>& ties = {},
                               const std::vector<std::vector<std::string>>& names = {},
                               const MuonMatrices& muon = {});
inline BufferPlan plan_engine_buffers(const std::vector<GroupLayout>& layouts,
                                      const EngineConfig& cfg, int rank = 0,
                                      bool on_device = false) {
  return plan_engine_buffers(layouts, {}, cfg, rank, on_device);
}

}  // namespace zs
