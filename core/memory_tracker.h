// Per-rank accounting of the bytes the runtime holds, by category, current and peak.
//
// Every buffer zeroshard allocates is registered here by zs::Buffer (and by the CUDA caching
// allocator); tests compare these figures with the ZeRO formulas and with the memory planner.
// Thread-safety: all methods may be called concurrently (relaxed atomics; peaks are exact).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace zs {

enum class MemCategory : int {
  kParams = 0,   // compute-dtype parameters (full replica or shard)
  kGrads,        // accumulated gradients (full buffer or shard)
  kMaster,       // fp32 master weights
  kOptimizer,    // optimizer state (Adam m and v)
  kActivations,  // activations kept for backward, the model's working buffers
  kCommBuffers,  // transient gather/prefetch buffers, unit gradient buffers, collective scratch
  kHostOffload,  // offloaded optimizer state in the host arena
  kFrozen,       // frozen parameters in their storage dtype (full or shard; no master, no grads)
  kOther,
  kCount
};
constexpr int kNumMemCategories = static_cast<int>(MemCategory::kCount);

// "params", "grads", "master", "optimizer", "activations", "comm_buffers", "host_offload", "other"
std::string_view mem_category_name(MemCategory c);

class MemoryTracker {
 public:
  MemoryTracker() = default;
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  void allocated(MemCategory c, int64_t bytes);
  void freed(MemCategory c, int64_t bytes);

  int64_t current(MemCategory c) const;
  int64_t peak(MemCategory c) const;
  // Sum over categories of the current bytes; peak_total() is the peak of that sum.
  int64_t current_total() const;
  int64_t peak_total() const;
  // Sets every peak to its current value (e.g. after set-up, to measure a step alone).
  void reset_peaks();

  // The process-wide tracker, used when a buffer is given no tracker.
  static MemoryTracker& process();

 private:
  static void raise_peak(std::atomic<int64_t>& peak, int64_t value);
  std::array<std::atomic<int64_t>, kNumMemCategories> current_{};
  std::array<std::atomic<int64_t>, kNumMemCategories> peak_{};
  std::atomic<int64_t> total_{0};
  std::atomic<int64_t> total_peak_{0};
};

}  // namespace zs
