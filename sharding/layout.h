// The flat layout of one parameter group (one unit), as a pure value: no memory, no
// communication. Computed from the parameters' sizes, the world size and an alignment, and
// tested on its own (tests/sharding).
//
// [Note: padding] Parameters are concatenated in declaration order; each starts at a multiple of
// `align` elements. The group is padded so that it splits into `world` equal shards whose size is
// a multiple of `align` (64-byte aligned shard starts for every dtype when align = 32). Rank r
// owns elements [r * shard_numel, (r + 1) * shard_numel) of the padded group. Padding elements
// are zero in every buffer and never updated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zs {

struct ParamSlot {
  int64_t offset = 0;  // first element in the full (padded) group
  int64_t numel = 0;
};

// The overlap of one rank's shard with one parameter.
struct ShardSegment {
  int param = 0;             // index into GroupLayout::params
  int64_t shard_offset = 0;  // first element within the shard
  int64_t param_offset = 0;  // first element within the parameter
  int64_t length = 0;
};

struct GroupLayout {
  std::vector<ParamSlot> params;
  int world = 1;
  int64_t align = 1;
  int64_t numel = 0;         // sum of the parameters' numel
  int64_t padded_numel = 0;  // world * shard_numel
  int64_t shard_numel = 0;

  int64_t padding() const { return padded_numel - numel; }
  int64_t shard_begin(int rank) const { return static_cast<int64_t>(rank) * shard_numel; }
  // Segments of rank's shard that hold parameter elements, in order (padding is skipped).
  std::vector<ShardSegment> shard_segments(int rank) const;
};

// An empty list gives an empty group (0 elements, 0 per shard): a unit whose parameters are all
// frozen has no trainable group. Throws zs::Error(kInvalidArgument) for world < 1, align < 1, or
// a parameter with numel < 1.
GroupLayout compute_group_layout(std::span<const int64_t> param_numels, int world,
                                 int64_t align = 32);

}  // namespace zs
