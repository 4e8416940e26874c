// What a ZeRO stage keeps resident and when it communicates, as a value decided once when the
// engine is built. The engine's step reads these fields instead of comparing stage numbers.
//
//   stage                      0      1      2      3
//   shard_params               -      -      -      yes   gather for compute, release after
//   shard_grads                -      -      yes    yes   reduce-scatter every micro-batch
//   shard_optimizer            -      yes    yes    yes   master, m, v hold this rank's shard
//   gather_reduced_grads       yes    -      -      -     all-gather the reduced gradient
//   gather_updated_params      -      yes    yes    -     all-gather the updated replica
//
// Pure value, no state; thread-safe.
#pragma once

namespace zs {

struct ShardingPolicy {
  // The compute-dtype parameters are kept as this rank's shard and all-gathered into a slot just
  // in time for each use (stage 3); else a full replica is resident.
  bool shard_params = false;
  // The gradient is kept as this rank's shard: each micro-batch's gradient is reduce-scattered
  // as soon as its backward is done (stages 2-3). Else a full gradient buffer accumulates the
  // micro-batches locally and is reduce-scattered in place once per step (stages 0-1).
  bool shard_grads = false;
  // The fp32 master and optimizer state cover this rank's shard (stages 1-3); else the group.
  bool shard_optimizer = false;

  // Every rank updates the whole group, so it needs the whole reduced gradient (stage 0).
  bool gather_reduced_grads() const { return !shard_optimizer; }
  // Each rank updates its region of a resident replica, which an all-gather completes
  // (stages 1-2).
  bool gather_updated_params() const { return shard_optimizer && !shard_params; }

  static ShardingPolicy for_stage(int stage) {
    ShardingPolicy p;
    p.shard_params = stage >= 3;
    p.shard_grads = stage >= 2;
    p.shard_optimizer = stage >= 1;
    return p;
  }
};

}  // namespace zs
