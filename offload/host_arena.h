// The host arena for offloaded optimizer state: one allocation made once, at set-up, and carved
// into 64-byte aligned spans by a bump allocator. Nothing is ever freed on its own; the whole
// arena goes when it is destroyed.
//
// Memory: on CUDA builds with a device present at run time, page-locked with cudaHostAlloc
// (portable), so device<->host copies run at full speed and asynchronously; otherwise (CPU builds,
// or no device at run time) 64-byte aligned host memory (2 MiB aligned and advised
// MADV_HUGEPAGE when at least 2 MiB: a first touch costs ~9.5 us per 4 KiB page here). Either
// way the arena is zero-filled and every page touched in the constructor, so no step pays for
// page faults. The whole capacity is registered with the MemoryTracker under
// MemCategory::kHostOffload for the arena's life.
//
// Layout advice: spans of power-of-two sizes taken back to back start at power-of-two distances,
// so p[i], m[i], v[i] share cache sets and alias in the CPU's 4 KiB store-to-load check; take a
// few cache lines more per span (bench_adam pads 320 B) to stagger them.
//
// Thread-safety: take()/take_bytes() may be called concurrently (an atomic bump pointer); the
// spans they return are disjoint. The constructor and destructor must not race with anything.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/memory_tracker.h"

namespace zs::offload {

class HostArena {
 public:
  static constexpr int64_t kAlign = 64;

  // Allocates `bytes` (rounded up to a multiple of kAlign; 0 allowed) and registers them with
  // `tracker` (the process tracker if null) under kHostOffload. Throws zs::Error(kOutOfMemory)
  // naming the size when the allocation fails, kInvalidArgument when bytes < 0.
  explicit HostArena(int64_t bytes, MemoryTracker* tracker = nullptr);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  // A span of n floats (n >= 0), 64-byte aligned, zero on first use, valid for the arena's life.
  // Throws zs::Error(kOutOfMemory) naming n, the bytes in use and the capacity when it does not
  // fit; the arena is unchanged then.
  float* take(int64_t n);
  // The same for raw bytes (bf16/fp16 copies, flags): 64-byte aligned.
  void* take_bytes(int64_t bytes);

  // Bytes handed out so far (each span rounded up to kAlign), and the arena's size.
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t capacity() const { return capacity_; }
  // True when the memory is page-locked (cudaHostAlloc).
  bool pinned() const { return pinned_; }
  const void* base() const { return base_; }

 private:
  char* base_ = nullptr;
  int64_t capacity_ = 0;
  bool pinned_ = false;
  MemoryTracker* tracker_ = nullptr;
  std::atomic<int64_t> used_{0};
};

}  // namespace zs::offload
