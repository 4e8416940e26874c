// Muon's orthogonalisation: the quintic Newton-Schulz iteration of Keller Jordan's Muon (as used
// by Moonlight), in fp32, with every sum in a fixed order, so that its bits depend on neither the
// thread count nor the ISA ([Note: Newton-Schulz determinism]).
//
// For G [rows x cols] (row-major), with X the transpose when rows > cols (so X is r x c, r <= c):
//   X = G / (||G||_F + 1e-7)               (the norm's squares summed in fp64, in element order)
//   repeat `steps` times:
//     A = X X^T                            (r x r)
//     B = b A + c (A A)                    (r x r)
//     X = a X + B X                        (r x c)
//   O = X (transposed back when rows > cols)
// with (a, b, c) = (3.4445, -4.7750, 2.0315). Knows nothing of ranks or sharding.
#pragma once

#include <cstdint>

namespace zs::optim {

inline constexpr float kNewtonSchulzA = 3.4445f;
inline constexpr float kNewtonSchulzB = -4.7750f;
inline constexpr float kNewtonSchulzC = 2.0315f;

// fp32 elements of the workspace newton_schulz() needs for a rows x cols matrix:
// 3 r c + 2 r^2 with r = min(rows, cols), c = max(rows, cols).
int64_t newton_schulz_workspace(int64_t rows, int64_t cols);

// out[rows x cols] = the orthogonalised g[rows x cols] after `steps` >= 1 iterations (above).
// `workspace` holds newton_schulz_workspace(rows, cols) floats; g and out may be the same span but
// must not overlap the workspace. `threads` > 0 caps the OpenMP threads (0: the OpenMP default);
// the result is the same bits at any thread count. A zero matrix gives zeros.
void newton_schulz(const float* g, int64_t rows, int64_t cols, int steps, float* out,
                   float* workspace, int threads = 0);

// c[m x n] = a[m x k] b[k x n], row-major, dense: each element is the sum over k in increasing
// order, each product rounded before it is added (no FMA), from 0. The bits do not depend on the
// thread count (rows are split among threads) or the vector width (lanes are columns).
void matmul_fixed_order(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                        int threads = 0);

}  // namespace zs::optim
