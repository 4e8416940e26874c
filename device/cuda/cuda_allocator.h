// Device and pinned-host memory for the CUDA backend, behind zs::Allocator so zs::Buffer (and the
// MemoryTracker accounting it does) works unchanged on GPUs.
//
// [Note: caching allocator] CudaCachingAllocator keeps freed blocks in per-size-class free lists
// and hands them out again; cudaMalloc runs only on a miss, cudaFree only in release_cached() and
// the destructor. Size classes: requests are rounded up to a multiple of 512 bytes below 1 MiB
// and to a multiple of 2 MiB from 1 MiB on (the waste is under 512 bytes, resp. 2 MiB, per block).
// A block is reused only by a request of the same class, so steady-state training, which asks for
// the same sizes every step, never calls cudaMalloc or cudaFree after its first step.
//
// Zero-fill: Allocator's contract is zero-filled memory. allocate() zeroes with cudaMemset
// followed by a device synchronization, because the caller may touch the memory from any stream.
// Buffers are created at set-up, never in a step, so this host synchronization never runs inside a
// step.
//
// Stream semantics: a block freed while kernels on some stream still use it may be handed out
// again at once. The runtime frees buffers only at tear-down or after a step boundary where the
// engine has synchronized; callers that free earlier must order it themselves (as with cudaFree).
//
// Accounting: Buffer registers the requested bytes with the MemoryTracker under its category;
// stats() gives the allocator's own view (bytes reserved from CUDA, cached, hits and misses).
//
// Thread-safety: allocate/deallocate/stats may be called concurrently (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"

namespace zs {

struct CudaAllocatorStats {
  int64_t reserved_bytes = 0;  // held from cudaMalloc (in use + cached)
  int64_t in_use_bytes = 0;    // rounded sizes of live blocks
  int64_t cached_bytes = 0;    // rounded sizes of free blocks in the lists
  int64_t peak_reserved_bytes = 0;
  int64_t cuda_mallocs = 0;  // misses
  int64_t cuda_frees = 0;    // only release_cached() and the destructor free
  int64_t hits = 0;          // allocations served from a free list
};

class CudaCachingAllocator final : public Allocator {
 public:
  // Serves device `device` (which must exist: throws zs::Error(kUnsupported) otherwise).
  explicit CudaCachingAllocator(int device);
  ~CudaCachingAllocator() override;
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  // Zero-filled, 256-byte aligned (cudaMalloc's alignment) device memory of at least `bytes`.
  // Throws zs::Error(kOutOfMemory) naming the size and the allocator's figures when cudaMalloc
  // fails even after the cache was released. bytes == 0 returns nullptr.
  void* allocate(size_t bytes) override;
  // `p` must come from allocate() with the same `bytes`; the block goes back to its free list.
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::cuda(device_); }

  // cudaFree every cached (free) block; returns the bytes given back.
  int64_t release_cached();
  CudaAllocatorStats stats() const;

  // The size class (rounded bytes) a request of `bytes` is served from; exposed for tests.
  static size_t round_size(size_t bytes);

 private:
  int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  std::unordered_map<void*, size_t> live_;     // block -> rounded size
  CudaAllocatorStats stats_;
};

// Page-locked host memory (cudaHostAlloc, portable): the staging side of device<->host copies
// that overlap compute. Every allocation calls cudaHostAlloc and every free cudaFreeHost, so it is
// meant for set-up-time arenas (offload/), not per-step use. Zero-filled, 64-byte aligned.
// Thread-safety: stateless apart from CUDA; concurrent use is fine.
class PinnedHostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::cpu(); }
};

// The process-wide pinned allocator.
PinnedHostAllocator& pinned_host_allocator();

// [Note: one GPU per rank] The device this process uses: the local rank from the MPI launcher's
// environment (LaunchEnvironment in core/settings.h: OMPI_COMM_WORLD_LOCAL_RANK, then
// MPI_LOCALRANKID, SLURM_LOCALID; 0 when none is set), and the local rank count
// (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE). With at least as many
// visible devices as local ranks, local rank i uses device i. With fewer, each rank may see a GPU
// of its own (a per-rank CUDA_VISIBLE_DEVICES, Slurm's
// --gpus-per-task=1) or ranks may share one: the choice is then local_rank % device_count, and the
// NcclCommunicator's constructor, which sees every rank's device UUID, refuses two ranks on one GPU
// with a message naming both ranks. Throws zs::Error(kUnsupported) when no device is visible.
// Calls cudaSetDevice on the chosen device and returns its index.
int select_local_device();

// The same decision as a pure function, for tests: local rank/size and the visible device count.
// Returns the device index or throws as above.
int choose_local_device(int local_rank, int local_size, int device_count);

}  // namespace zs
