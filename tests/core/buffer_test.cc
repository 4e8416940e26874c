#include "core/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace zs {
namespace {

bool all_zero(const Buffer& b) {
  const auto* p = b.as<uint8_t>();
  for (size_t i = 0; i < b.size(); ++i)
    if (p[i] != 0) return false;
  return true;
}

TEST(Buffer, AlignedAndZeroFilled) {
  MemoryTracker t;
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{4097}, size_t{3} << 20}) {
    Buffer b(bytes, MemCategory::kParams, &t);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes;
    EXPECT_EQ(b.size(), bytes);
    EXPECT_TRUE(all_zero(b)) << bytes;
    EXPECT_EQ(b.device(), Device::cpu());
  }
  EXPECT_EQ(t.current_total(), 0);
}

TEST(Buffer, TrackerAccounting) {
  MemoryTracker t;
  {
    Buffer a(1000, MemCategory::kGrads, &t);
    Buffer b(24, MemCategory::kMaster, &t);
    EXPECT_EQ(t.current(MemCategory::kGrads), 1000);
    EXPECT_EQ(t.current(MemCategory::kMaster), 24);
    a.reset();
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(t.current(MemCategory::kGrads), 0);
    EXPECT_EQ(t.peak(MemCategory::kGrads), 1000);
  }
  EXPECT_EQ(t.current_total(), 0);
  EXPECT_EQ(t.peak_total(), 1024);
}

TEST(Buffer, MoveTransfersOwnership) {
  MemoryTracker t;
  Buffer a(256, MemCategory::kOptimizer, &t);
  a.as<float>()[3] = 2.5f;
  void* p = a.data();
  Buffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 256u);
  EXPECT_EQ(b.category(), MemCategory::kOptimizer);
  EXPECT_EQ(b.as<float>()[3], 2.5f);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is specified empty
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(t.current(MemCategory::kOptimizer), 256);

  Buffer c(64, MemCategory::kParams, &t);
  c = std::move(b);  // frees c's old 64 bytes
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(t.current(MemCategory::kParams), 0);
  EXPECT_EQ(t.current(MemCategory::kOptimizer), 256);
  c = Buffer();
  EXPECT_EQ(t.current_total(), 0);
}

TEST(Buffer, ZeroBytesAndDefault) {
  MemoryTracker t;
  Buffer z(0, MemCategory::kOther, &t);
  EXPECT_TRUE(z.empty());
  EXPECT_EQ(t.current_total(), 0);
  Buffer d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.device(), Device::cpu());
  EXPECT_EQ(Device::cuda(1).to_string(), "cuda:1");
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
}

TEST(Buffer, DefaultsToProcessTracker) {
  MemoryTracker& p = MemoryTracker::process();
  const int64_t before = p.current(MemCategory::kHostOffload);
  {
    Buffer b(128, MemCategory::kHostOffload);
    EXPECT_EQ(p.current(MemCategory::kHostOffload), before + 128);
  }
  EXPECT_EQ(p.current(MemCategory::kHostOffload), before);
}

}  // namespace
}  // namespace zs
