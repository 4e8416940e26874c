// Just-in-time gathering of sharded parameter groups (ZeRO-3) with prefetch.
//
// A step visits units in a fixed schedule (forward 0..U-1, then backward U-1..0, repeated per
// micro-batch). The scheduler owns depth+1 full-size buffers ("slots"). acquire(pos) makes sure
// the unit at schedule position pos is gathered (starting its all-gather if it was not already in
// flight, then waiting for it) and starts the gathers of positions pos+1 .. pos+depth into free
// slots, so they run while pos computes. release(pos) returns its slot. Positions must be
// acquired in increasing order and released before the next acquire.
//
// State of a slot: free -> in flight (all-gather started) -> gathered -> free. Transitions are
// asserted. All buffers are allocated in the constructor (MemCategory::kCommBuffers).
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/communicator.h"
#include "core/buffer.h"

namespace zs {

class GatherScheduler {
 public:
  struct Source {
    const void* shard = nullptr;  // this rank's shard, shard_numel elements of dtype
    int64_t shard_numel = 0;
  };

  // Slots come from `alloc` (the CPU allocator when null): the memory `comm` works on.
  GatherScheduler(Communicator& comm, DType dtype, int64_t max_padded_numel, int depth,
                  MemoryTracker* tracker, Allocator* alloc = nullptr);

  int num_slots() const { return static_cast<int>(slots_.size()); }
  void* slot_data(int slot) { return slots_[slot].buffer.data(); }

  // Starts a sequence: the unit at position pos is schedule[pos % period]; positions run
  // 0..length-1. `sources` and `schedule` must outlive the sequence.
  void begin(const std::vector<Source>* sources, const int* schedule, int64_t period,
             int64_t length);
  // Returns the slot holding the gathered unit of position pos.
  int acquire(int64_t pos);
  void release(int64_t pos);
  // Waits for every gather in flight and frees all slots (end of a sequence).
  void finish();

 private:
  enum class State { kFree, kInFlight, kGathered };
  struct Slot {
    Buffer buffer;
    State state = State::kFree;
    int64_t pos = -1;
    WorkHandle work;
  };
  int find(int64_t pos) const;
  int free_slot() const;
  void start(int64_t pos, int slot);

  Communicator& comm_;
  DType dtype_;
  int depth_;
  std::vector<Slot> slots_;
  const std::vector<Source>* sources_ = nullptr;
  const int* schedule_ = nullptr;
  int64_t period_ = 1;
  int64_t length_ = 0;
  int64_t next_to_start_ = 0;
};

}  // namespace zs
