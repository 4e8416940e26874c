// Local reductions behind the host collectives: the determinism contract of communicator.h in one
// place ([Note: deterministic reduction] in reduce_kernels.cc).
#pragma once

#include <cstddef>
#include <string_view>

#include "collectives/communicator.h"
#include "core/dtype.h"

namespace zs {

// Where the reduction tree splits the leaves [lo, hi), hi - lo >= 2: lo + ceil((hi - lo) / 2)
// ([Note: deterministic reduction] in reduce_kernels.cc).
inline int reduction_tree_split(int lo, int hi) { return lo + (hi - lo + 1) / 2; }

// out[i] = op over r = 0..n-1, in the tree of the Note, of pieces[r * stride + i] for i in
// [0, count).
// Accumulates in fp32 (fp64 for fp64) and rounds once to `dtype`; kAvg divides the sum by n before
// rounding; kMax propagates NaN. `out` may alias one piece exactly (every input of an element is
// read before it is written), never overlap partially. dtype must be a float type.
void reduce_pieces(const void* pieces, size_t stride, int n, void* out, size_t count, DType dtype,
                   ReduceOp op);

// The same reduction with rank r's input at sources[r] (any addresses): out[i] = op over
// r = 0..n-1 of sources[r][i]. Same bits as reduce_pieces; `out` may alias one source exactly.
// The SIMD level of the fp32 sums (core/cpu_features.h: "scalar", "avx2", "avx512");
// 16-bit inputs are widened and narrowed by core/convert.h's kernels.
std::string_view reduce_path_name();

void reduce_sources(const void* const* sources, int n, void* out, size_t count, DType dtype,
                    ReduceOp op);

}  // namespace zs
