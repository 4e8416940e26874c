#include "runtime/invariant_stats.h"

#include <algorithm>
#include <cmath>

namespace zs {

void append_stats_chunks(const GroupLayout& layout, int rank, const float* shard, int group,
                         std::vector<StatsChunk>& out) {
  const int64_t a = layout.align;
  for (const ShardSegment& seg : layout.shard_segments(rank)) {
    // seg.shard_offset is a multiple of a exactly where the shard's group position is.
    int64_t b = seg.shard_offset;
    const int64_t e = seg.shard_offset + seg.length;
    while (b < e) {
      const int64_t next = std::min(e, (b / a + 1) * a);
      out.push_back({shard + b, next - b, group});
      b = next;
    }
  }
}

void add_sum_of_squares(std::span<const StatsChunk> chunks, ExactSum& squares,
                        std::span<uint8_t> finite) {
  for (const StatsChunk& c : chunks) {
    double s = 0.0;
    bool ok = true;
    for (int64_t i = 0; i < c.n; ++i) {
      const double x = c.data[i];
      ok = ok && std::isfinite(x);
      s += x * x;
    }
    if (!ok) {
      finite[static_cast<size_t>(c.group)] = 0;
      continue;
    }
    squares.add(s);
  }
}

}  // namespace zs
