#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/simd_dispatch.h"

namespace zs {
namespace {

// [Note: deterministic reduction]
// Every element is reduced on its own, in an fp32 (fp64) accumulator, and rounded once at the end.
// The contributions of ranks 0..n-1 combine in one fixed binary tree over the rank index
// (reduction_tree_split()): tree(lo, hi) = tree(lo, mid) op tree(mid, hi) with
// mid = lo + ceil((hi - lo) / 2), a leaf being one rank's input. For n = 2^j it is the balanced
// tree, so the sum over ranks [0, n) splits exactly at every power-of-two boundary: a reduction
// over n = N * L ranks equals the node-local trees' results combined by the tree over the N
// nodes (hierarchical collectives, hybrid sharding), and a tree over a global index whose
// consecutive ranges of 2^i leaves are on one rank is cut the same way at any power-of-two world
// size ([Note: world-invariant reduction] in runtime/engine_config.h). For n <= 3 the tree is
// rank order. Blocking over kBlock elements only changes which elements are processed together,
// never the order of operations within an element, so the bits do not depend on the message size,
// the chunking or the block size. Build flags keep the compiler from contracting the adds into
// FMAs (-ffp-contract=off) or reassociating them.
constexpr size_t kBlock = 1024;

// The fp32 sum, the gradients' reduction, at the dispatched SIMD level: one add per element, so
// every level gives the same bits.
ZS_SIMD_BODY(void, add_f32, (float* acc, const float* x, size_t m)) {
  for (size_t j = 0; j < m; ++j) acc[j] += x[j];
}
ZS_SIMD_DISPATCH(void, add_f32, (float* acc, const float* x, size_t m), (acc, x, m))

template <typename Acc>
inline void combine(Acc* acc, const Acc* x, size_t m, ReduceOp op) {
  if constexpr (std::is_same_v<Acc, float>) {
    if (op != ReduceOp::kMax) return add_f32(acc, x, m);
  }
  if (op == ReduceOp::kMax) {
    // NaN wins: once acc is NaN, x > acc is false and acc stays NaN.
    for (size_t j = 0; j < m; ++j) acc[j] = (x[j] > acc[j] || x[j] != x[j]) ? x[j] : acc[j];
  } else {
    for (size_t j = 0; j < m; ++j) acc[j] += x[j];
  }
}

template <typename Acc>
inline void finish(Acc* acc, size_t m, ReduceOp op, int n) {
  if (op != ReduceOp::kAvg) return;
  const Acc d = static_cast<Acc>(n);
  for (size_t j = 0; j < m; ++j) acc[j] /= d;
}

// The tree of the Note over leaves [lo, hi), into levels[depth] (each kBlock accumulators; depth
// + 1 .. for the right subtrees). leaf(r, tmp) returns rank r's m elements in the accumulator
// type: a pointer into the source where it has that type (no copy), else tmp after widening into
// it. A right subtree of one leaf is combined straight from what leaf() returns.
template <typename Acc, typename Leaf>
void tree_reduce(int lo, int hi, int depth, std::vector<Acc>& levels, size_t m, ReduceOp op,
                 const Leaf& leaf) {
  Acc* dst = levels.data() + static_cast<size_t>(depth) * kBlock;
  if (hi - lo == 1) {
    const Acc* x = leaf(lo, dst);
    if (x != dst) std::copy(x, x + m, dst);
    return;
  }
  const int mid = reduction_tree_split(lo, hi);
  tree_reduce(lo, mid, depth, levels, m, op, leaf);
  if (hi - mid == 1) return combine(dst, leaf(mid, dst + kBlock), m, op);
  tree_reduce(mid, hi, depth + 1, levels, m, op, leaf);
  combine(dst, dst + kBlock, m, op);
}

// Levels a tree over n leaves needs: its depth + 1.
inline size_t tree_levels(int n) {
  size_t d = 1;
  for (int w = n; w > 1; w = w - w / 2) ++d;
  return d;
}

// fp32 and fp64: the accumulator is the element type. src(r) is rank r's first element.
template <typename T, typename Src>
void reduce_same(Src src, int n, T* out, size_t count, ReduceOp op) {
  thread_local std::vector<T> levels;
  levels.resize(std::max(levels.size(), tree_levels(n) * kBlock));
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t m = std::min(kBlock, count - b);
    tree_reduce(0, n, 0, levels, m, op, [&](int r, T*) { return src(r) + b; });
    finish(levels.data(), m, op, n);
    std::copy(levels.data(), levels.data() + m, out + b);
  }
}

// fp16 and bf16: widen each block to fp32 with the bulk converters, narrow once at the end.
template <typename Src>
void reduce_half(Src src, int n, uint16_t* out, size_t count, DType dtype, ReduceOp op) {
  auto widen = dtype == DType::kBF16 ? &bf16_to_fp32 : &fp16_to_fp32;
  auto narrow = dtype == DType::kBF16 ? &fp32_to_bf16 : &fp32_to_fp16;
  thread_local std::vector<float> levels;
  levels.resize(std::max(levels.size(), tree_levels(n) * kBlock));
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t m = std::min(kBlock, count - b);
    tree_reduce(0, n, 0, levels, m, op, [&](int r, float* tmp) {
      widen(src(r) + b, tmp, m);
      return static_cast<const float*>(tmp);
    });
    finish(levels.data(), m, op, n);
    narrow(levels.data(), out + b, m);
  }
}

template <typename Src>
void reduce_any(Src src, int n, void* out, size_t count, DType dtype, ReduceOp op) {
  if (count == 0) return;
  ZS_ASSERT(n >= 1);
  switch (dtype) {
    case DType::kF32:
      reduce_same([&](int r) { return static_cast<const float*>(src(r)); }, n,
                  static_cast<float*>(out), count, op);
      return;
    case DType::kF64:
      reduce_same([&](int r) { return static_cast<const double*>(src(r)); }, n,
                  static_cast<double*>(out), count, op);
      return;
    case DType::kF16:
    case DType::kBF16:
      reduce_half([&](int r) { return static_cast<const uint16_t*>(src(r)); }, n,
                  static_cast<uint16_t*>(out), count, dtype, op);
      return;
    default:
      fail(ErrorCode::kInvalidArgument, "reduction on {} is not supported", dtype_name(dtype));
  }
}

}  // namespace

void reduce_pieces(const void* pieces, size_t stride, int n, void* out, size_t count, DType dtype,
                   ReduceOp op) {
  const size_t step = stride * (count == 0 ? 0 : dtype_size(dtype));
  const char* base = static_cast<const char*>(pieces);
  reduce_any([&](int r) { return static_cast<const void*>(base + static_cast<size_t>(r) * step); },
             n, out, count, dtype, op);
}

std::string_view reduce_path_name() { return simd_level_name(active_simd_level()); }

void reduce_sources(const void* const* sources, int n, void* out, size_t count, DType dtype,
                    ReduceOp op) {
  reduce_any([&](int r) { return sources[r]; }, n, out, count, dtype, op);
}

}  // namespace zs
