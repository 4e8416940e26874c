// Muon's step on sharded states ([Note: Muon parameters] in runtime/engine_config.h): each rank
// updates the momentum of its own shard of every Muon matrix, the shards' Nesterov u are
// all-gathered over the shard group, and every rank that holds a piece of a matrix orthogonalises
// the whole matrix (optim/newton_schulz.h, fixed summation order) and applies the result to its
// piece.
//
// [Note: Muon sharding] Why each holder computes the whole matrix (rather than one owner per
// matrix that scatters its result): it is one in-place all-gather per unit and no second
// collective, and it is exact by construction: every rank runs the same fixed-order kernel on the
// same bits, so the update is the same bits on every rank, at every stage (stage 0 holds the whole
// u already and communicates nothing) and, in the world-invariant mode, at every world size. The
// price is the Newton-Schulz FLOPs of a matrix repeated on each rank holding a piece of it (shards
// are contiguous slices of the unit's flat group, so a rank holds pieces of about M / N + 1 of a
// unit's M matrices at N ranks; docs/optimizers.md).
// Thread-safety: one thread (the engine's).
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "runtime/buffer_plan.h"
#include "runtime/engine_config.h"
#include "sharding/layout.h"
#include "unit/unit.h"

namespace zs {

// One group's fp32 state as Muon sees it (runtime/optimizer_states.h's MasterShard).
struct MuonShard {
  float* master = nullptr;
  float* momentum = nullptr;  // numel elements, indexed like master
  const std::vector<ShardSegment>* segments = nullptr;
  int64_t begin = 0;  // first padded-group element held
  int64_t numel = 0;
};

class MuonUpdate {
 public:
  // Buffers from the plan (plan.muon_u_bytes, plan.muon_ns_bytes, under kCommBuffers); `shard`
  // is the shard group's communicator, the one the groups' layouts span.
  MuonUpdate(const EngineConfig& config, const BufferPlan& plan, Communicator& shard,
             MemoryTracker* tracker);
  // Group `group`'s Muon matrices (one entry per trainable parameter, layout order); groups
  // attach in order.
  void attach(int group, const GroupLayout& layout, std::vector<MuonMatrix> matrices);
  bool is_muon(int group, int param) const;
  // Updates the Muon parameters of `group` in state s from its reduced gradient `grad` (grad
  // dtype, indexed like s): momentum, Nesterov u, all-gather, Newton-Schulz, decay and step;
  // writes each updated value's compute-dtype copy into `out` (indexed like s; null: the
  // parameters are the master). `specs`: the group's trainable parameters (their weight_decay).
  // Collective over the shard group when the state is a shard and the group has Muon matrices.
  void update(int group, const MuonShard& s, const void* grad, void* out, float lr,
              float grad_scale, const std::vector<ParamSpec>& specs);

 private:
  struct Group {
    const GroupLayout* layout = nullptr;
    std::vector<MuonMatrix> matrices;
    bool any = false;
  };
  const EngineConfig& config_;
  Communicator& shard_;
  std::vector<Group> groups_;
  Buffer u_;   // [padded group]: the momentum-updated u of the group being updated
  Buffer ns_;  // [rows x cols] the result, then the Newton-Schulz workspace
};

}  // namespace zs
