#include "device/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "core/settings.h"
#include "device/cuda/cuda_error.h"

namespace zs {

namespace {

constexpr size_t kSmallQuantum = 512;
constexpr size_t kLargeQuantum = size_t{2} << 20;

size_t round_up(size_t x, size_t q) { return (x + q - 1) / q * q; }

// Makes `device` current for the scope of one allocator call, restoring the caller's device.
// Never throws (it runs in the destructor too): a failure surfaces in the CUDA call that follows.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    cudaGetDevice(&prev_);
    if (prev_ != device && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  }
  ~DeviceGuard() noexcept {
    int cur = -1;
    cudaGetDevice(&cur);
    if (cur != prev_ && prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// [Note: caching allocator]

size_t CudaCachingAllocator::round_size(size_t bytes) {
  return bytes < kLargeQuantum / 2 ? round_up(bytes, kSmallQuantum)
                                   : round_up(bytes, kLargeQuantum);
}

CudaCachingAllocator::CudaCachingAllocator(int device) : device_(device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  ZS_CHECK(device >= 0 && device < count, ErrorCode::kUnsupported,
           "CudaCachingAllocator: device {} requested, {} CUDA device(s) present", device, count);
}

CudaCachingAllocator::~CudaCachingAllocator() {
  release_cached();
  // Live blocks at destruction are leaked buffers of the caller; free them so the device memory
  // comes back (their Buffers must not be used after this).
  DeviceGuard guard(device_);
  for (auto& [p, size] : live_) cudaFree(p);
}

void* CudaCachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = round_size(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(rounded);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(rounded);
      stats_.hits += 1;
    }
  }
  DeviceGuard guard(device_);
  if (p == nullptr) {
    cudaError_t err = cudaMalloc(&p, rounded);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached();  // fragmentation across classes: give the cache back and retry once
      err = cudaMalloc(&p, rounded);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      const CudaAllocatorStats s = stats();
      fail(ErrorCode::kOutOfMemory,
           "cuda:{}: cudaMalloc of {} bytes ({} requested) failed: {}; allocator holds {} bytes "
           "({} in use, {} cached)",
           device_, rounded, bytes, cudaGetErrorString(err), s.reserved_bytes, s.in_use_bytes,
           s.cached_bytes);
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.cuda_mallocs += 1;
    stats_.reserved_bytes += static_cast<int64_t>(rounded);
    if (stats_.reserved_bytes > stats_.peak_reserved_bytes) {
      stats_.peak_reserved_bytes = stats_.reserved_bytes;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = rounded;
    stats_.in_use_bytes += static_cast<int64_t>(rounded);
  }
  // Why synchronizations: Allocator promises zero-filled memory usable from any stream. A cached
  // block may have been freed while work on another (non-blocking) stream still used it: wait for
  // that first, then for the fill. Buffers are made at set-up, never inside a step (the header).
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before zero-fill)");
  cuda_check(cudaMemset(p, 0, bytes), "cudaMemset (zero-fill)");
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (zero-fill)");
  return p;
}

void CudaCachingAllocator::deallocate(void* p, size_t bytes) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  ZS_CHECK(it != live_.end(), ErrorCode::kInternal,
           "CudaCachingAllocator: deallocate of {} bytes at {} which this allocator (cuda:{}) "
           "did not hand out",
           bytes, p, device_);
  const size_t rounded = it->second;
  ZS_ASSERT(rounded == round_size(bytes));
  live_.erase(it);
  free_[rounded].push_back(p);
  stats_.in_use_bytes -= static_cast<int64_t>(rounded);
  stats_.cached_bytes += static_cast<int64_t>(rounded);
}

int64_t CudaCachingAllocator::release_cached() {
  std::map<size_t, std::vector<void*>> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(free_);
  }
  DeviceGuard guard(device_);
  int64_t bytes = 0, frees = 0;
  for (auto& [size, blocks] : drop) {
    for (void* p : blocks) {
      cudaFree(p);
      bytes += static_cast<int64_t>(size);
      frees += 1;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.cached_bytes -= bytes;
  stats_.reserved_bytes -= bytes;
  stats_.cuda_frees += frees;
  return bytes;
}

CudaAllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// ---------------------------------------------------------------------------------------------
// Pinned host memory

void* PinnedHostAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorCode::kOutOfMemory, "cudaHostAlloc of {} pinned bytes failed: {}", bytes,
         cudaGetErrorString(err));
  }
  std::memset(p, 0, bytes);
  return p;
}

void PinnedHostAllocator::deallocate(void* p, size_t) {
  if (p != nullptr) cudaFreeHost(p);
}

PinnedHostAllocator& pinned_host_allocator() {
  static PinnedHostAllocator alloc;
  return alloc;
}

// ---------------------------------------------------------------------------------------------
// [Note: one GPU per rank]

int choose_local_device(int local_rank, int local_size, int device_count) {
  const std::string vis =
      LaunchEnvironment::from_environment().cuda_visible_devices.value_or("(unset)");
  ZS_CHECK(device_count > 0, ErrorCode::kUnsupported,
           "no CUDA device visible to local rank {} (CUDA_VISIBLE_DEVICES={})", local_rank, vis);
  ZS_CHECK(local_rank >= 0 && local_size >= 1 && local_rank < local_size,
           ErrorCode::kInvalidArgument, "local rank {} outside a local size of {}", local_rank,
           local_size);
  // Fewer devices than local ranks: per-rank visibility, or sharing that the NCCL communicator's
  // device-UUID check refuses (this process cannot tell the two apart).
  return local_size <= device_count ? local_rank : local_rank % device_count;
}

int select_local_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  const LaunchEnvironment launch = LaunchEnvironment::from_environment();
  const int local_rank = launch.local_rank.value_or(0);
  const int local_size = launch.local_size.value_or(local_rank + 1);
  const int device = choose_local_device(local_rank, local_size, count);
  cuda_check(cudaSetDevice(device), "cudaSetDevice (select_local_device)");
  return device;
}

}  // namespace zs
