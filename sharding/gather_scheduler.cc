#include "sharding/gather_scheduler.h"

#include "core/error.h"

namespace zs {

GatherScheduler::GatherScheduler(Communicator& comm, DType dtype, int64_t max_padded_numel,
                                 int depth, MemoryTracker* tracker, Allocator* alloc)
    : comm_(comm), dtype_(dtype), depth_(depth), slots_(static_cast<size_t>(depth) + 1) {
  for (Slot& s : slots_) {
    s.buffer = Buffer(static_cast<size_t>(max_padded_numel) * dtype_size(dtype),
                      MemCategory::kCommBuffers, tracker, alloc);
  }
}

void GatherScheduler::begin(const std::vector<Source>* sources, const int* schedule, int64_t period,
                            int64_t length) {
  for (const Slot& s : slots_) ZS_ASSERT(s.state == State::kFree);
  sources_ = sources;
  schedule_ = schedule;
  period_ = period;
  length_ = length;
  next_to_start_ = 0;
}

int GatherScheduler::find(int64_t pos) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state != State::kFree && slots_[i].pos == pos) return static_cast<int>(i);
  }
  return -1;
}

int GatherScheduler::free_slot() const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == State::kFree) return static_cast<int>(i);
  }
  return -1;
}

void GatherScheduler::start(int64_t pos, int slot) {
  Slot& s = slots_[slot];
  ZS_ASSERT(s.state == State::kFree);
  const Source& src = (*sources_)[schedule_[pos % period_]];
  s.pos = pos;
  s.state = State::kInFlight;
  s.work = comm_.start_all_gather(src.shard, s.buffer.data(), static_cast<size_t>(src.shard_numel),
                                  dtype_);
}

int GatherScheduler::acquire(int64_t pos) {
  ZS_ASSERT(pos >= 0 && pos < length_);
  // Gathers start in schedule order on every rank (collectives must be issued in one order).
  while (next_to_start_ <= pos) {
    const int slot = free_slot();
    ZS_ASSERT(slot >= 0);
    start(next_to_start_++, slot);
  }
  const int slot = find(pos);
  ZS_ASSERT(slot >= 0);
  Slot& s = slots_[slot];
  if (s.state == State::kInFlight) {
    s.work->wait();
    s.work.reset();
    s.state = State::kGathered;
  }
  // Prefetch: the next `depth` positions go in flight while this one computes.
  while (next_to_start_ < length_ && next_to_start_ <= pos + depth_) {
    const int f = free_slot();
    if (f < 0) break;
    start(next_to_start_++, f);
  }
  return slot;
}

void GatherScheduler::release(int64_t pos) {
  const int slot = find(pos);
  ZS_ASSERT(slot >= 0 && slots_[slot].state == State::kGathered);
  slots_[slot].state = State::kFree;
  slots_[slot].pos = -1;
}

void GatherScheduler::finish() {
  for (Slot& s : slots_) {
    if (s.state == State::kInFlight) s.work->wait();
    s.work.reset();
    s.state = State::kFree;
    s.pos = -1;
  }
}

}  // namespace zs
