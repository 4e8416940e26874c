#include "runtime/gather_schedule.h"

#include <algorithm>

#include "core/error.h"

namespace zs {

GatherSchedule::GatherSchedule(int slots, int64_t slot_bytes, int depth, MemoryTracker* tracker,
                               Allocator* alloc)
    : slot_used_(static_cast<size_t>(slots), 0), depth_(depth) {
  for (int i = 0; i < slots; ++i) {
    slots_.emplace_back(static_cast<size_t>(slot_bytes), MemCategory::kCommBuffers, tracker, alloc);
  }
}

bool GatherSchedule::held(const ParamGroup& g) const {
  const size_t i = static_cast<size_t>(g.index());
  return i < held_.size() && held_[i] != 0;
}

void GatherSchedule::begin(std::span<ParamGroup* const> order) {
  for (char used : slot_used_) ZS_ASSERT(!used);
  hold_mark_.assign(order.size(), 0);
  std::vector<char> open(held_.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    if (!held(*order[i])) continue;
    char& o = open[static_cast<size_t>(order[i]->index())];
    hold_mark_[i] = o ? 2 : 1;
    o = !o;
  }
  // The parameters may have changed since the last sequence (an update, a load): the gather paths
  // forget what they kept ([Note: hpZ]).
  for (ParamGroup* g : order) g->params_changed();
  order_ = order;
  cursor_ = 0;
  next_to_start_ = 0;
}

int GatherSchedule::free_slot() const {
  for (size_t i = 0; i < slot_used_.size(); ++i) {
    if (!slot_used_[i]) return static_cast<int>(i);
  }
  return -1;
}

// Starts gathers in order up to position `limit`, while slots are free and the next group is
// sharded. Resident groups are passed over: they need no gather.
void GatherSchedule::prefetch(int64_t limit) {
  const int64_t end = static_cast<int64_t>(order_.size());
  while (next_to_start_ < end && next_to_start_ <= limit) {
    ParamGroup& g = *order_[static_cast<size_t>(next_to_start_)];
    if ((g.param_state() == ParamGroup::ParamState::kGathered && g.slot() < 0) ||
        hold_mark_[static_cast<size_t>(next_to_start_)] == 2) {
      ++next_to_start_;  // a resident replica, or the end of a hold: nothing to gather
      continue;
    }
    if (g.param_state() != ParamGroup::ParamState::kSharded) return;  // still held: wait
    const int s = free_slot();
    if (s < 0) return;
    slot_used_[static_cast<size_t>(s)] = 1;
    g.start_gather(s, slots_[static_cast<size_t>(s)].data());
    ++next_to_start_;
  }
}

std::span<const ParamView> GatherSchedule::acquire(ParamGroup& g) {
  ZS_ASSERT(cursor_ < static_cast<int64_t>(order_.size()) &&
            order_[static_cast<size_t>(cursor_)] == &g);
  if (g.slot() < 0 && g.param_state() == ParamGroup::ParamState::kGathered) {
    if (next_to_start_ == cursor_) ++next_to_start_;
    return g.views();  // resident
  }
  if (hold_mark_[static_cast<size_t>(cursor_)] == 2) {  // still gathered since its last visit
    if (next_to_start_ == cursor_) ++next_to_start_;
    return g.gathered_views();
  }
  prefetch(cursor_);  // this group's own gather, if it was not started ahead
  ZS_ASSERT(g.param_state() == ParamGroup::ParamState::kGathering);
  std::span<const ParamView> views = g.wait_gather();
  prefetch(cursor_ + depth_);  // the next `depth` groups gather while this one computes
  return views;
}

void GatherSchedule::release(ParamGroup& g) {
  ZS_ASSERT(order_[static_cast<size_t>(cursor_)] == &g);
  const bool keep = hold_mark_[static_cast<size_t>(cursor_)] == 1;
  ++cursor_;
  if (g.slot() < 0 || keep) return;  // resident, or held to its next visit
  slot_used_[static_cast<size_t>(g.release())] = 0;
}

void GatherSchedule::finish() {
  for (size_t i = static_cast<size_t>(cursor_); i < order_.size(); ++i) {
    ParamGroup& g = *order_[i];
    if (g.param_state() == ParamGroup::ParamState::kGathering) g.wait_gather();
    if (g.slot() >= 0) slot_used_[static_cast<size_t>(g.release())] = 0;
  }
  // Holds with no later visit (an evaluation's forward) end here.
  for (size_t i = 0; i < std::min(static_cast<size_t>(cursor_), order_.size()); ++i) {
    ParamGroup& g = *order_[i];
    if (hold_mark_[i] == 1 && g.slot() >= 0 && g.param_state() == ParamGroup::ParamState::kGathered)
      slot_used_[static_cast<size_t>(g.release())] = 0;
  }
  for (char used : slot_used_) ZS_ASSERT(!used);
  order_ = {};
  cursor_ = next_to_start_ = 0;
}

}  // namespace zs
