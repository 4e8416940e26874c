// The step's statistics in the world-invariant mode ([Note: world-invariant reduction] in
// runtime/engine_config.h): the loss and the gradient's sum of squares as exact sums (ExactSum),
// so that how the micro-batches and the gradient elements are split over ranks cannot change a
// bit of them.
//
// The sum of squares is taken per chunk: the elements of one parameter inside one run of `align`
// elements of its group's padded layout (align = the layout's alignment, which every shard
// boundary and every parameter offset is a multiple of, so a chunk never straddles ranks and holds
// the same elements at every world size). A chunk's squares are summed in fp64 in element order;
// the chunk sums go into the ExactSum. Host memory, fp32 gradients.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/exact_sum.h"
#include "sharding/layout.h"

namespace zs {

struct StatsChunk {
  const float* data = nullptr;
  int64_t n = 0;
  int group = 0;  // index of the group's finite flag
};

// The chunks of this rank's gradient shard `shard` (layout.shard_numel fp32 elements of group
// `group`, rank `rank` of the layout's world), appended to `out`.
void append_stats_chunks(const GroupLayout& layout, int rank, const float* shard, int group,
                         std::vector<StatsChunk>& out);

// Adds every chunk's sum of squares to `squares`; finite[g] = 0 where a chunk of group g holds
// a NaN or an infinity (left alone otherwise).
void add_sum_of_squares(std::span<const StatsChunk> chunks, ExactSum& squares,
                        std::span<uint8_t> finite);

}  // namespace zs
