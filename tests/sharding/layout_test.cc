// The flat group layout as a pure value: offsets, padding, shard boundaries and segments,
// checked against sizes computed independently here.
#include <numeric>

#include <gtest/gtest.h>

#include "core/error.h"
#include "sharding/layout.h"

namespace zs {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

TEST(Layout, OffsetsAlignedAndShardsEqual) {
  const std::vector<int64_t> numels = {260, 20, 400, 20, 3};
  for (int world : {1, 2, 3, 4, 7, 8}) {
    for (int64_t align : {1, 16, 32}) {
      const GroupLayout g = compute_group_layout(numels, world, align);
      int64_t end = 0;
      for (size_t i = 0; i < numels.size(); ++i) {
        EXPECT_EQ(g.params[i].offset, round_up(end, align));
        EXPECT_EQ(g.params[i].numel, numels[i]);
        end = g.params[i].offset + numels[i];
      }
      EXPECT_EQ(g.numel, 703);
      EXPECT_EQ(g.shard_numel % align, 0);
      EXPECT_EQ(g.padded_numel, g.shard_numel * world);
      EXPECT_GE(g.padded_numel, end);
      EXPECT_LT(g.padded_numel - end, world * align)
          << "padding is at most one aligned row per rank";
      EXPECT_EQ(g.padding(), g.padded_numel - 703);
    }
  }
}

TEST(Layout, SegmentsCoverEveryParameterElementOnce) {
  const std::vector<int64_t> numels = {5, 1000, 7, 64, 33};
  for (int world : {1, 2, 4, 5}) {
    const GroupLayout g = compute_group_layout(numels, world, 32);
    std::vector<int> hits(static_cast<size_t>(g.padded_numel), 0);
    int64_t covered = 0;
    for (int r = 0; r < world; ++r) {
      for (const ShardSegment& s : g.shard_segments(r)) {
        EXPECT_GE(s.shard_offset, 0);
        EXPECT_LE(s.shard_offset + s.length, g.shard_numel);
        const int64_t global = g.shard_begin(r) + s.shard_offset;
        EXPECT_EQ(global, g.params[s.param].offset + s.param_offset);
        for (int64_t i = 0; i < s.length; ++i) ++hits[global + i];
        covered += s.length;
      }
    }
    EXPECT_EQ(covered, g.numel);
    for (size_t p = 0; p < numels.size(); ++p)
      for (int64_t i = 0; i < numels[p]; ++i) EXPECT_EQ(hits[g.params[p].offset + i], 1);
  }
}

TEST(Layout, SmallGroupOnManyRanks) {
  const std::vector<int64_t> numels = {3};
  const GroupLayout g = compute_group_layout(numels, 4, 32);
  EXPECT_EQ(g.shard_numel, 32);
  EXPECT_EQ(g.padded_numel, 128);
  EXPECT_EQ(g.shard_segments(0).size(), 1u);
  EXPECT_TRUE(g.shard_segments(1).empty());
}

TEST(Layout, BadInput) {
  const std::vector<int64_t> ok = {4};
  const std::vector<int64_t> zero = {4, 0};
  EXPECT_THROW(compute_group_layout(ok, 0, 32), Error);
  EXPECT_THROW(compute_group_layout(ok, 2, 0), Error);
  EXPECT_THROW(compute_group_layout(zero, 2, 32), Error);
  const GroupLayout empty = compute_group_layout(std::vector<int64_t>{}, 2, 32);
  EXPECT_EQ(empty.numel, 0);
  EXPECT_EQ(empty.padded_numel, 0);
  EXPECT_EQ(empty.shard_numel, 0);
  EXPECT_TRUE(empty.shard_segments(1).empty());
}

}  // namespace
}  // namespace zs
