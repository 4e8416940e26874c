// The caching allocator (reuse, stats, tracker accounting), the pinned host allocator, and the
// one-GPU-per-rank rule. The device-selection rule is pure and runs everywhere; the rest skips
// without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

TEST(LocalDevice, OneGpuPerRank) {
  EXPECT_EQ(choose_local_device(0, 1, 1), 0);
  EXPECT_EQ(choose_local_device(3, 8, 8), 3);
  EXPECT_EQ(choose_local_device(2, 4, 8), 2);
  // Fewer devices than local ranks: each rank may see its own GPU (per-rank visibility); sharing
  // is refused later by the NCCL communicator's UUID check (find_shared_device).
  EXPECT_EQ(choose_local_device(1, 2, 1), 0);
  EXPECT_EQ(choose_local_device(3, 4, 2), 1);
  try {
    choose_local_device(0, 2, 0);
    ADD_FAILURE() << "no device accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("no CUDA device visible"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_local_device(0, 1, 0), Error);
  EXPECT_THROW(choose_local_device(2, 2, 4), Error);
}

TEST(CudaCachingAllocator, SizeClasses) {
  EXPECT_EQ(CudaCachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CudaCachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CudaCachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CudaCachingAllocator::round_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(CudaCachingAllocator::round_size((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CudaCachingAllocator::round_size((3u << 20) - 7), 4u << 20);
}

TEST(CudaCachingAllocator, ReusesBlocksWithoutCudaMalloc) {
  ZS_REQUIRE_CUDA();
  CudaCachingAllocator alloc(0);
  MemoryTracker tracker;
  // Step 1 allocates; steps 2..5 ask for the same sizes and must be served from the cache.
  const std::vector<size_t> sizes = {1000, 4096, 3u << 20, 100, 1000};
  for (int step = 0; step < 5; ++step) {
    std::vector<Buffer> bufs;
    for (size_t s : sizes) bufs.emplace_back(s, MemCategory::kCommBuffers, &tracker, &alloc);
    EXPECT_EQ(bufs[0].device(), Device::cuda(0));
    EXPECT_EQ(tracker.current(MemCategory::kCommBuffers), 1000 + 4096 + (3 << 20) + 100 + 1000);
    // Zero-filled on every hand-out, reused or not.
    std::vector<uint8_t> host(1000, 0xff);
    cuda_check(cudaMemcpy(host.data(), bufs[0].data(), 1000, cudaMemcpyDeviceToHost), "copy");
    EXPECT_EQ(std::count(host.begin(), host.end(), 0), 1000);
    cuda_check(cudaMemset(bufs[0].data(), 0xab, 1000), "dirty");
  }
  const CudaAllocatorStats s = alloc.stats();
  std::printf("mallocs %lld hits %lld reserved %lld cached %lld\n",
              static_cast<long long>(s.cuda_mallocs), static_cast<long long>(s.hits),
              static_cast<long long>(s.reserved_bytes), static_cast<long long>(s.cached_bytes));
  EXPECT_EQ(s.cuda_mallocs, 5);
  EXPECT_EQ(s.hits, 20);
  EXPECT_EQ(s.cuda_frees, 0);
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  EXPECT_EQ(tracker.current(MemCategory::kCommBuffers), 0);
  EXPECT_EQ(alloc.release_cached(), s.reserved_bytes);
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
  EXPECT_EQ(alloc.stats().cuda_frees, 5);
}

TEST(CudaCachingAllocator, ForeignPointerIsRejected) {
  ZS_REQUIRE_CUDA();
  CudaCachingAllocator alloc(0);
  int dummy = 0;
  EXPECT_THROW(alloc.deallocate(&dummy, 4), Error);
  EXPECT_THROW(CudaCachingAllocator{cuda_device_count()}, Error);
}

TEST(PinnedHostAllocator, ZeroFilledAndTracked) {
  ZS_REQUIRE_CUDA();
  MemoryTracker tracker;
  Buffer b(1 << 20, MemCategory::kHostOffload, &tracker, &pinned_host_allocator());
  EXPECT_EQ(b.device(), Device::cpu());
  EXPECT_EQ(tracker.current(MemCategory::kHostOffload), 1 << 20);
  cudaPointerAttributes attr{};
  cuda_check(cudaPointerGetAttributes(&attr, b.data()), "cudaPointerGetAttributes");
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  const auto* p = b.as<uint8_t>();
  EXPECT_EQ(std::count(p, p + (1 << 20), 0), 1 << 20);
}

}  // namespace
}  // namespace zs
