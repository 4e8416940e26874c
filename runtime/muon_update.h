// Muon's step on sharded states ([Note: Muon parameters] in runtime/engine_config.h): each rank
// updates the momentum of its own shard of every Muon matrix, the shards' Nesterov u are
// all-gathered over the shard group, each matrix is orthogonalised by one owner rank
// (optim/newton_schulz.h, fixed summation order) and the results reduce-scattered back, and each
// rank applies them to its pieces.
//
// [Note: Muon sharding] A whole state (stage 0, or one rank) orthogonalises every matrix itself
// and communicates nothing. A sharded state all-gathers u over the shard group, then each matrix
// is orthogonalised once, by its owner (muon_owners: the largest matrices first, each to the
// least loaded rank by Newton-Schulz FLOPs), and one reduce-scatter hands each rank its shard of
// the results ([Note: Muon owners] in muon_update.cc: exact, the owner's bits). So the
// Newton-Schulz work of a unit is split over its ranks instead of repeated on every rank that
// holds a piece of a matrix, for a second collective of the same size as the all-gather
// ((N - 1) / N x 4 bytes per element of the unit per rank). Every rank applies the same bits at
// every stage and, in the world-invariant mode, at every world size.
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

// The Newton-Schulz FLOPs of one matrix at `ns_steps` iterations (what the owners balance).
double newton_schulz_flops(const MuonMatrix& m, int ns_steps);
// The owner rank of each matrix of a unit over `ranks` ranks (-1 for a parameter that is not a
// Muon matrix): the matrices by decreasing FLOPs (ties in layout order), each to the rank with the
// least FLOPs so far (ties: the lowest rank). Depends on the shapes and `ranks` only.
std::vector<int> muon_owners(const std::vector<MuonMatrix>& matrices, int ranks, int ns_steps);

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
    std::vector<int> owners;  // muon_owners over the layout's ranks
    bool any = false;
  };
  const EngineConfig& config_;
  Communicator& shard_;
  std::vector<Group> groups_;
  Buffer u_;   // [padded group]: the momentum-updated u of the group being updated
  Buffer ns_;  // [rows x cols] the result, then the Newton-Schulz workspace
};

}  // namespace zs
