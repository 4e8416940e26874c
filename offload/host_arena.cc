#include "offload/host_arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#if defined(ZS_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "core/error.h"

namespace zs::offload {
namespace {

constexpr int64_t kHugePage = int64_t{2} << 20;

#if defined(ZS_HAVE_CUDA)
// Page-locked memory when a device is usable now; nullptr (and the aligned path) otherwise.
void* try_pinned(int64_t bytes) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for whoever asks next
    return nullptr;
  }
  void* p = nullptr;
  if (cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorCode::kOutOfMemory, "HostArena: cudaHostAlloc of {} bytes failed", bytes);
  }
  return p;
}
#endif

}  // namespace

HostArena::HostArena(int64_t bytes, MemoryTracker* tracker)
    : tracker_(tracker != nullptr ? tracker : &MemoryTracker::process()) {
  ZS_CHECK(bytes >= 0, ErrorCode::kInvalidArgument, "HostArena: bytes = {} < 0", bytes);
  capacity_ = (bytes + kAlign - 1) / kAlign * kAlign;
  if (capacity_ == 0) return;
#if defined(ZS_HAVE_CUDA)
  base_ = static_cast<char*>(try_pinned(capacity_));
  pinned_ = base_ != nullptr;
#endif
  if (base_ == nullptr) {
    // 2 MiB alignment lets transparent huge pages back the whole arena.
    const size_t align = capacity_ >= kHugePage ? kHugePage : kAlign;
    void* p = nullptr;
    if (posix_memalign(&p, align, static_cast<size_t>(capacity_)) != 0) {
      fail(ErrorCode::kOutOfMemory, "HostArena: allocation of {} bytes failed", capacity_);
    }
    base_ = static_cast<char*>(p);
    if (capacity_ >= kHugePage) {
      madvise(base_, static_cast<size_t>(capacity_), MADV_HUGEPAGE);  // advice: failure is fine
    }
  }
  // Zero and first-touch every page now, not in the first step.
  std::memset(base_, 0, static_cast<size_t>(capacity_));
  tracker_->allocated(MemCategory::kHostOffload, capacity_);
}

HostArena::~HostArena() {
  if (base_ == nullptr) return;
  tracker_->freed(MemCategory::kHostOffload, capacity_);
#if defined(ZS_HAVE_CUDA)
  if (pinned_) {
    cudaFreeHost(base_);
    return;
  }
#endif
  std::free(base_);
}

void* HostArena::take_bytes(int64_t bytes) {
  ZS_CHECK(bytes >= 0, ErrorCode::kInvalidArgument, "HostArena::take: bytes = {} < 0", bytes);
  const int64_t size = (bytes + kAlign - 1) / kAlign * kAlign;
  int64_t offset = used_.load(std::memory_order_relaxed);
  // Offsets stay multiples of kAlign, so every span starts aligned (base_ is).
  do {
    if (size > capacity_ - offset) {
      fail(ErrorCode::kOutOfMemory,
           "HostArena::take: {} bytes requested, {} of {} bytes already in use", bytes, offset,
           capacity_);
    }
  } while (!used_.compare_exchange_weak(offset, offset + size, std::memory_order_relaxed));
  return base_ + offset;
}

float* HostArena::take(int64_t n) {
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "HostArena::take: n = {} < 0", n);
  return static_cast<float*>(take_bytes(n * static_cast<int64_t>(sizeof(float))));
}

}  // namespace zs::offload
