// Devices, allocators and the one owning buffer type of the runtime.
//
// A Buffer is a move-only, aligned, zero-initialised allocation on one device, registered with a
// MemoryTracker under one category for its whole life. Buffers are created at set-up from the
// plan and reused; nothing in a training step allocates. The CUDA backend supplies its own
// Allocator (a caching allocator over cudaMalloc, and cudaHostAlloc for pinned host memory), so
// code written against Buffer and Device does not change shape when CUDA is present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/memory_tracker.h"

namespace zs {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string to_string() const;
  static Device cpu() { return {}; }
  static Device cuda(int i) { return {DeviceKind::kCuda, i}; }
};

// Where bytes come from. Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns zero-filled memory of at least `bytes` bytes aligned to 64 bytes; throws
  // zs::Error(kOutOfMemory) naming the size on failure. bytes == 0 returns nullptr.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual Device device() const = 0;
};

// Host memory, 64-byte aligned; regions of 2 MiB and more are advised to use transparent huge
// pages (a first touch costs ~9.5 us per 4 KiB page on the target machines).
Allocator& cpu_allocator();

class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` from `alloc` and registers them with `tracker` (process tracker if null).
  Buffer(size_t bytes, MemCategory category, MemoryTracker* tracker = nullptr,
         Allocator* alloc = nullptr);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  size_t size() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  MemCategory category() const { return category_; }
  Device device() const;
  // Frees the memory now (the buffer becomes empty).
  void reset();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemCategory category_ = MemCategory::kOther;
  MemoryTracker* tracker_ = nullptr;
  Allocator* alloc_ = nullptr;
};

}  // namespace zs
