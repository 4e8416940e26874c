#include "core/memory_tracker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace zs {
namespace {

TEST(MemoryTracker, CurrentAndPeakPerCategory) {
  MemoryTracker t;
  t.allocated(MemCategory::kParams, 100);
  t.allocated(MemCategory::kGrads, 50);
  t.allocated(MemCategory::kParams, 20);
  EXPECT_EQ(t.current(MemCategory::kParams), 120);
  EXPECT_EQ(t.current(MemCategory::kGrads), 50);
  EXPECT_EQ(t.current(MemCategory::kMaster), 0);
  EXPECT_EQ(t.current_total(), 170);
  t.freed(MemCategory::kParams, 100);
  EXPECT_EQ(t.current(MemCategory::kParams), 20);
  EXPECT_EQ(t.peak(MemCategory::kParams), 120);
  EXPECT_EQ(t.peak(MemCategory::kGrads), 50);
  EXPECT_EQ(t.current_total(), 70);
  EXPECT_EQ(t.peak_total(), 170);
}

TEST(MemoryTracker, ResetPeaks) {
  MemoryTracker t;
  t.allocated(MemCategory::kCommBuffers, 1000);
  t.freed(MemCategory::kCommBuffers, 1000);
  t.allocated(MemCategory::kOptimizer, 10);
  t.reset_peaks();
  EXPECT_EQ(t.peak(MemCategory::kCommBuffers), 0);
  EXPECT_EQ(t.peak(MemCategory::kOptimizer), 10);
  EXPECT_EQ(t.peak_total(), 10);
  t.allocated(MemCategory::kCommBuffers, 300);
  t.freed(MemCategory::kCommBuffers, 300);
  EXPECT_EQ(t.peak(MemCategory::kCommBuffers), 300);
  EXPECT_EQ(t.peak_total(), 310);
}

TEST(MemoryTracker, CategoryNames) {
  EXPECT_EQ(mem_category_name(MemCategory::kParams), "params");
  EXPECT_EQ(mem_category_name(MemCategory::kCommBuffers), "comm_buffers");
  EXPECT_EQ(mem_category_name(MemCategory::kHostOffload), "host_offload");
  EXPECT_EQ(mem_category_name(MemCategory::kOther), "other");
}

TEST(MemoryTracker, ConcurrentUpdatesBalance) {
  MemoryTracker t;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&t] {
      for (int i = 0; i < 10000; ++i) {
        t.allocated(MemCategory::kActivations, 8);
        t.freed(MemCategory::kActivations, 8);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.current(MemCategory::kActivations), 0);
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_GE(t.peak(MemCategory::kActivations), 8);
  EXPECT_LE(t.peak(MemCategory::kActivations), 32);
}

}  // namespace
}  // namespace zs
