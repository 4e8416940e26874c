// The sum of one gradient shard over a step's micro-batches in a fixed binary tree ([Note:
// world-invariant reduction] in runtime/engine_config.h).
//
// k = 2^L micro-batches arrive in order m = 0 .. k-1, each an fp32 shard of n elements (already
// reduced over the ranks). Their sum is the balanced tree over m: tree(lo, hi) = tree(lo, mid) +
// tree(mid, hi) with mid = (lo + hi) / 2, a binary counter over L partial sums (partial j holds
// the sum of the last complete run of 2^j micro-batches), so at most L shards are kept. Every add
// is one fp32 addition per element, left operand the earlier micro-batches: the bits depend only
// on the inputs. Host memory only. Thread-safety: one thread.
#pragma once

#include <cstdint>

namespace zs {

class MicroBatchTree {
 public:
  MicroBatchTree() = default;
  // `partials`: levels(micro_batches) * n floats the tree may overwrite; micro_batches a power of
  // two.
  MicroBatchTree(int micro_batches, int64_t n, float* partials);
  // log2(micro_batches): the partial sums a tree keeps.
  static int levels(int micro_batches);

  // Micro-batch m's shard `x` (m counts 0, 1, ... k-1). On the last one the total is written to
  // `out` (which may be x); before it `out` is not touched. x is not written.
  void add(int m, const float* x, float* out);

 private:
  int k_ = 1;
  int64_t n_ = 0;
  float* partials_ = nullptr;
};

}  // namespace zs
