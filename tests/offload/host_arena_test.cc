#include "offload/host_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"

namespace zs::offload {
namespace {

TEST(HostArena, SpansAreAlignedDisjointAndZero) {
  MemoryTracker tracker;
  HostArena arena(1000, &tracker);
  EXPECT_EQ(arena.capacity(), 1024);  // rounded up to 64 bytes
  float* a = arena.take(1);
  float* b = arena.take(17);
  float* c = arena.take(16);
  for (float* x : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(x) % 64, 0u);
  EXPECT_EQ(b - a, 16);  // 1 float rounds up to 64 bytes
  EXPECT_EQ(c - b, 32);  // 17 floats round up to 128 bytes
  EXPECT_EQ(arena.used(), 64 + 128 + 64);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(b[i], 0.0f);
  void* raw = arena.take_bytes(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(raw) % 64, 0u);
  EXPECT_EQ(arena.used(), 320);
}

TEST(HostArena, ThrowsWhenFullAndStaysUsable) {
  MemoryTracker tracker;
  HostArena arena(256, &tracker);
  arena.take(32);  // 128 bytes
  try {
    arena.take(64);  // 256 bytes: does not fit
    FAIL() << "expected zs::Error";
  } catch (const zs::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  EXPECT_EQ(arena.used(), 128);
  EXPECT_NE(arena.take(32), nullptr);  // exactly the rest
  EXPECT_EQ(arena.used(), 256);
  EXPECT_THROW(arena.take(1), zs::Error);
  EXPECT_THROW(arena.take(-1), zs::Error);
  EXPECT_NE(arena.take(0), nullptr);  // an empty span fits anywhere
}

TEST(HostArena, TrackerCountsWholeCapacityUnderHostOffload) {
  MemoryTracker tracker;
  {
    HostArena arena(int64_t{8} << 20, &tracker);  // large enough for the huge-page path
    EXPECT_EQ(tracker.current(MemCategory::kHostOffload), int64_t{8} << 20);
    EXPECT_EQ(tracker.current_total(), int64_t{8} << 20);
    arena.take(1000);  // taking does not change the accounting
    EXPECT_EQ(tracker.current(MemCategory::kHostOffload), int64_t{8} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.base()) % 64, 0u);
    EXPECT_FALSE(arena.pinned() && arena.capacity() == 0);
  }
  EXPECT_EQ(tracker.current(MemCategory::kHostOffload), 0);
  EXPECT_EQ(tracker.peak(MemCategory::kHostOffload), int64_t{8} << 20);
  HostArena empty(0, &tracker);
  EXPECT_EQ(empty.capacity(), 0);
  EXPECT_EQ(tracker.current(MemCategory::kHostOffload), 0);
}

TEST(HostArena, ConcurrentTakesAreDisjoint) {
  MemoryTracker tracker;
  HostArena arena(4 * 1000 * 64, &tracker);
  std::vector<std::vector<float*>> got(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) got[t].push_back(arena.take(16));
    });
  }
  for (auto& t : ts) t.join();
  std::set<float*> all;
  for (auto& g : got) all.insert(g.begin(), g.end());
  EXPECT_EQ(all.size(), 4000u);
  EXPECT_EQ(arena.used(), arena.capacity());
}

}  // namespace
}  // namespace zs::offload
