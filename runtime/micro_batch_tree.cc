#include "runtime/micro_batch_tree.h"

#include <algorithm>

#include "core/error.h"

namespace zs {

MicroBatchTree::MicroBatchTree(int micro_batches, int64_t n, float* partials)
    : k_(micro_batches), n_(n), partials_(partials) {
  ZS_ASSERT(k_ >= 1 && (k_ & (k_ - 1)) == 0 && n_ >= 0 &&
            (levels(k_) == 0 || n_ == 0 || partials_));
}

int MicroBatchTree::levels(int micro_batches) {
  int l = 0;
  while ((1 << l) < micro_batches) ++l;
  return l;
}

void MicroBatchTree::add(int m, const float* x, float* out) {
  ZS_ASSERT(m >= 0 && m < k_);
  const float* cur = x;
  int j = 0;
  // Each set low bit of m closes a run: the partial of the 2^j before it, plus this one.
  for (; (m >> j) & 1; ++j) {
    float* p = partials_ + j * n_;
    for (int64_t i = 0; i < n_; ++i) p[i] += cur[i];
    cur = p;
  }
  float* dst = m == k_ - 1 ? out : partials_ + j * n_;
  if (dst != cur) std::copy(cur, cur + n_, dst);
}

}  // namespace zs
