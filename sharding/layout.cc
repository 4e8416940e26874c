#include "sharding/layout.h"

#include <algorithm>

#include "core/error.h"

namespace zs {

namespace {
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
}  // namespace

GroupLayout compute_group_layout(std::span<const int64_t> numels, int world, int64_t align) {
  ZS_CHECK(world >= 1, ErrorCode::kInvalidArgument, "group layout: world size {} < 1", world);
  ZS_CHECK(align >= 1, ErrorCode::kInvalidArgument, "group layout: alignment {} < 1", align);
  GroupLayout g;
  g.world = world;
  g.align = align;
  int64_t end = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    ZS_CHECK(numels[i] >= 1, ErrorCode::kInvalidArgument,
             "group layout: parameter {} has {} elements", i, numels[i]);
    const int64_t offset = round_up(end, align);
    g.params.push_back({offset, numels[i]});
    g.numel += numels[i];
    end = offset + numels[i];
  }
  g.shard_numel = round_up((end + world - 1) / world, align);
  g.padded_numel = g.shard_numel * world;
  return g;
}

std::vector<ShardSegment> GroupLayout::shard_segments(int rank) const {
  std::vector<ShardSegment> out;
  const int64_t lo = shard_begin(rank);
  const int64_t hi = lo + shard_numel;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t b = std::max(lo, params[i].offset);
    const int64_t e = std::min(hi, params[i].offset + params[i].numel);
    if (b < e) out.push_back({static_cast<int>(i), b - lo, b - params[i].offset, e - b});
  }
  return out;
}

}  // namespace zs
