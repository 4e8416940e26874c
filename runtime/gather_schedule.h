// Just-in-time gathering with prefetch, in the order the groups are visited.
//
// A step visits the groups in a fixed order (forward 0..U-1, then backward U-1..0, per
// micro-batch); begin() takes that order. The schedule owns depth+1 gather slots: acquire(g)
// makes sure g, the next group of the order, is gathered (starting its all-gather if it was not
// already in flight, then waiting for it) and starts the gathers of the groups after it, up to
// `depth` ahead, into free slots, so they run while g computes. release(g) gives its slot back.
// Gathers start in the order's sequence on every rank (collectives are issued in one order); a
// prefetch stops at a group that is still gathered for an earlier visit (the last unit, between
// its forward and its backward) and resumes once it is released.
//
// A group marked held (hold(), the owner of a tied parameter: [Note: tied parameters] in
// unit/unit.h) keeps its slot from one visit to its next visit in the order, or to finish() when
// there is none: forward to backward within a micro-batch, the whole forward of an evaluation.
// The visit that ends a hold needs no gather; the plan gives each held group a slot of its own.
//
// Groups with a resident replica (no policy.shard_params) are not gathered: acquire returns
// their views, release does nothing. All buffers are allocated in the constructor
// (MemCategory::kCommBuffers). Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "runtime/param_group.h"

namespace zs {

class GatherSchedule {
 public:
  // `slots` buffers of `slot_bytes` from `alloc` (the memory the communicator works on); 0 slots
  // when no group is sharded.
  GatherSchedule(int slots, int64_t slot_bytes, int depth, MemoryTracker* tracker,
                 Allocator* alloc);

  // Marks the groups whose index has held[index] != 0 as held (before the first begin()).
  void hold(std::vector<char> held) { held_ = std::move(held); }
  // Starts a sequence over `order` (which must outlive it). hpZ's secondary shards are
  // forgotten: the first gather of each group in the sequence goes over the world.
  void begin(std::span<ParamGroup* const> order);
  // `g` must be the next group of the order. Returns its parameter views.
  std::span<const ParamView> acquire(ParamGroup& g);
  void release(ParamGroup& g);
  // Waits for every gather in flight and frees all slots (end of a sequence).
  void finish();

 private:
  int free_slot() const;
  void prefetch(int64_t limit);

  std::vector<Buffer> slots_;
  std::vector<char> slot_used_;
  int depth_;
  bool held(const ParamGroup& g) const;

  std::vector<char> held_;  // per group index
  // Per position of the order: 1 where a held group's visit starts a hold, 2 where it ends one.
  std::vector<char> hold_mark_;
  std::span<ParamGroup* const> order_;
  int64_t cursor_ = 0;         // position of the next group to acquire
  int64_t next_to_start_ = 0;  // position of the next gather to start
};

}  // namespace zs
