#include "core/memory_tracker.h"

namespace zs {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kParams:
      return "params";
    case MemCategory::kGrads:
      return "grads";
    case MemCategory::kMaster:
      return "master";
    case MemCategory::kOptimizer:
      return "optimizer";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kCommBuffers:
      return "comm_buffers";
    case MemCategory::kHostOffload:
      return "host_offload";
    case MemCategory::kFrozen:
      return "frozen";
    case MemCategory::kOther:
      return "other";
    case MemCategory::kCount:
      break;
  }
  return "invalid";
}

void MemoryTracker::raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t old = peak.load(std::memory_order_relaxed);
  while (value > old && !peak.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::allocated(MemCategory c, int64_t bytes) {
  const int i = static_cast<int>(c);
  raise_peak(peak_[i], current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(total_peak_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryTracker::freed(MemCategory c, int64_t bytes) {
  current_[static_cast<int>(c)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

int64_t MemoryTracker::current(MemCategory c) const {
  return current_[static_cast<int>(c)].load(std::memory_order_relaxed);
}
int64_t MemoryTracker::peak(MemCategory c) const {
  return peak_[static_cast<int>(c)].load(std::memory_order_relaxed);
}
int64_t MemoryTracker::current_total() const { return total_.load(std::memory_order_relaxed); }
int64_t MemoryTracker::peak_total() const { return total_peak_.load(std::memory_order_relaxed); }

void MemoryTracker::reset_peaks() {
  for (int i = 0; i < kNumMemCategories; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_.load());
}

// Never destroyed, like cpu_allocator(): buffers that outlive it would report to a dead object.
MemoryTracker& MemoryTracker::process() {
  static MemoryTracker* tracker = new MemoryTracker;
  return *tracker;
}

}  // namespace zs
