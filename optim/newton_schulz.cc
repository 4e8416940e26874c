#include "optim/newton_schulz.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "core/cpu_features.h"

namespace zs::optim {

// [Note: Newton-Schulz determinism] Muon's update must be the same bits whichever rank computes
// it, at any world size and stage, so the products are not oneDNN's (whose blocking, and so its
// summation order, follows the thread count and the ISA): each element of a product is its own
// chain c = c + a_k * b_k over k = 0, 1, ..., multiply then add (the project builds with
// -ffp-contract=off). Threads take tasks of whole rows (64 rows x 256 columns) and vector lanes
// are neighbouring columns, at every ISA level (AVX-512, AVX2 or generic vectors, dispatched by
// active_simd_level()), so neither the thread count nor the level changes any chain: every level
// equals the plain loop bit for bit (muon_test and its AVX2 twin check it). The norm's squares are
// summed in fp64 in element order.

namespace {

constexpr int64_t kRowBlock = 4;    // rows of C per tile, sharing each loaded piece of B
constexpr int64_t kRowGroup = 64;   // rows of C per task
constexpr int64_t kColStrip = 256;  // columns of C per task
constexpr int64_t kKBlock = 256;    // products per pass: a 256 x 256 block of B (256 KiB) in cache

// Rows [i0, i0 + nr) of C = A B, columns [j0, j1), one element at a time: the reference chain,
// for the edges the tiles do not cover.
void rows_plain(const float* a, const float* b, float* c, int64_t i0, int64_t nr, int64_t k,
                int64_t n, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < nr; ++r) {
    float* __restrict row = c + (i0 + r) * n;
    const float* ar = a + (i0 + r) * k;
    std::fill(row + j0, row + j1, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float x = ar[p];
      const float* __restrict bp = b + p * n;
      for (int64_t j = j0; j < j1; ++j) row[j] = row[j] + x * bp[j];
    }
  }
}

template <int W>
struct Lanes {
  typedef float type __attribute__((vector_size(4 * W)));
};

template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::type load(const float* p) {
  typename Lanes<W>::type v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// C[i0 .. i0 + 4)[j0 .. j0 + 2W) += the products of k in [k0, k1), in 8 vector registers, each
// lane its element's chain (from 0 when k0 = 0; continued from C, stored exactly, otherwise).
template <int W>
[[gnu::always_inline]] inline void tile(const float* a, const float* b, float* c, int64_t k,
                                        int64_t n, int64_t i0, int64_t j0, int64_t k0, int64_t k1) {
  using V = typename Lanes<W>::type;
  float* c0 = c + i0 * n + j0;
  V acc[8] = {};
  if (k0 > 0) {
    for (int r = 0; r < 4; ++r) {
      acc[2 * r] = load<W>(c0 + r * n);
      acc[2 * r + 1] = load<W>(c0 + r * n + W);
    }
  }
  V c00 = acc[0], c01 = acc[1], c10 = acc[2], c11 = acc[3], c20 = acc[4], c21 = acc[5],
    c30 = acc[6], c31 = acc[7];
  const float* a0 = a + i0 * k;
  const float* a1 = a0 + k;
  const float* a2 = a1 + k;
  const float* a3 = a2 + k;
  for (int64_t p = k0; p < k1; ++p) {
    // A scalar times a vector: the scalar in every lane (a broadcast, exact).
    const V b0 = load<W>(b + p * n + j0), b1 = load<W>(b + p * n + j0 + W);
    const float x0 = a0[p], x1 = a1[p], x2 = a2[p], x3 = a3[p];
    c00 = c00 + x0 * b0;
    c01 = c01 + x0 * b1;
    c10 = c10 + x1 * b0;
    c11 = c11 + x1 * b1;
    c20 = c20 + x2 * b0;
    c21 = c21 + x2 * b1;
    c30 = c30 + x3 * b0;
    c31 = c31 + x3 * b1;
  }
  const V out[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
  for (int r = 0; r < 4; ++r) {
    std::memcpy(c0 + r * n, &out[2 * r], sizeof(V));
    std::memcpy(c0 + r * n + W, &out[2 * r + 1], sizeof(V));
  }
}

// One task: rows [i0, i0 + nr) (up to kRowGroup), columns [j0, j1). The whole 4-row tiles go
// k-block by k-block, so that a k-block of the strip of B stays in cache for every row of the
// task; the edges (a last partial row block, the columns past the last whole tile) go element by
// element. Neither changes any chain.
template <int W>
[[gnu::always_inline]] inline void task_body(const float* a, const float* b, float* c, int64_t i0,
                                             int64_t nr, int64_t k, int64_t n, int64_t j0,
                                             int64_t j1) {
  const int64_t full_rows = nr / kRowBlock * kRowBlock;
  const int64_t j_tiles = j0 + (j1 - j0) / (2 * W) * (2 * W);
  for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
    const int64_t k1 = std::min(k, k0 + kKBlock);
    for (int64_t i = i0; i < i0 + full_rows; i += kRowBlock)
      for (int64_t j = j0; j < j_tiles; j += 2 * W) tile<W>(a, b, c, k, n, i, j, k0, k1);
  }
  if (j_tiles < j1 && full_rows > 0) rows_plain(a, b, c, i0, full_rows, k, n, j_tiles, j1);
  if (full_rows < nr) rows_plain(a, b, c, i0 + full_rows, nr - full_rows, k, n, j0, j1);
}

using TaskFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                        int64_t, int64_t);

void task_generic(const float* a, const float* b, float* c, int64_t i0, int64_t nr, int64_t k,
                  int64_t n, int64_t j0, int64_t j1) {
  task_body<4>(a, b, c, i0, nr, k, n, j0, j1);
}
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f,avx2"), gnu::flatten]] void task_avx512(const float* a, const float* b,
                                                               float* c, int64_t i0, int64_t nr,
                                                               int64_t k, int64_t n, int64_t j0,
                                                               int64_t j1) {
  task_body<16>(a, b, c, i0, nr, k, n, j0, j1);
}
[[gnu::target("avx2"), gnu::flatten]] void task_avx2(const float* a, const float* b, float* c,
                                                     int64_t i0, int64_t nr, int64_t k, int64_t n,
                                                     int64_t j0, int64_t j1) {
  task_body<8>(a, b, c, i0, nr, k, n, j0, j1);
}
#endif

// [Note: dispatched kernels] in core/simd_dispatch.h, by hand: the lane count differs by level,
// and no level changes a chain, so every level gives the same bits.
TaskFn task_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  switch (active_simd_level()) {
    case SimdLevel::kAvx512:
      return task_avx512;
    case SimdLevel::kAvx2:
      return task_avx2;
    case SimdLevel::kScalar:
      break;
  }
#endif
  return task_generic;
}

void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t T = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += T) {
    for (int64_t j0 = 0; j0 < cols; j0 += T) {
      const int64_t i1 = std::min(rows, i0 + T), j1 = std::min(cols, j0 + T);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
    }
  }
}

}  // namespace

void matmul_fixed_order(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                        int threads) {
  const int64_t row_groups = (m + kRowGroup - 1) / kRowGroup;
  const int64_t strips = (n + kColStrip - 1) / kColStrip;
  const int64_t tasks = row_groups * strips;
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  const TaskFn fn = task_fn();
  // Strip-major: consecutive tasks (a thread's, under the static schedule) reuse one strip of B.
  // Small products are not worth a fork; either way every element is the same chain.
#pragma omp parallel for schedule(static) num_threads(nt) if (m * n * k >= (int64_t{1} << 18))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t i0 = (t % row_groups) * kRowGroup, j0 = (t / row_groups) * kColStrip;
    fn(a, b, c, i0, std::min(kRowGroup, m - i0), k, n, j0, std::min(n, j0 + kColStrip));
  }
}

int64_t newton_schulz_workspace(int64_t rows, int64_t cols) {
  const int64_t r = std::min(rows, cols), c = std::max(rows, cols);
  return 3 * r * c + 2 * r * r;
}

void newton_schulz(const float* g, int64_t rows, int64_t cols, int steps, float* out,
                   float* workspace, int threads) {
  const bool tall = rows > cols;
  const int64_t r = tall ? cols : rows, c = tall ? rows : cols, rc = r * c;
  float* x = workspace;   // [r x c]
  float* xt = x + rc;     // [c x r]
  float* y = xt + rc;     // [r x c]
  float* a = y + rc;      // [r x r]
  float* aa = a + r * r;  // [r x r]: A A, then B
  double sq = 0.0;
  for (int64_t i = 0; i < rc; ++i) sq += static_cast<double>(g[i]) * g[i];
  const double inv = 1.0 / (std::sqrt(sq) + 1e-7);
  if (tall) {
    transpose(g, rows, cols, x);
  } else {
    std::memcpy(x, g, static_cast<size_t>(rc) * sizeof(float));
  }
  for (int64_t i = 0; i < rc; ++i) x[i] = static_cast<float>(x[i] * inv);
  for (int s = 0; s < steps; ++s) {
    transpose(x, r, c, xt);
    matmul_fixed_order(x, xt, a, r, c, r, threads);
    matmul_fixed_order(a, a, aa, r, r, r, threads);
    for (int64_t i = 0; i < r * r; ++i) aa[i] = kNewtonSchulzB * a[i] + kNewtonSchulzC * aa[i];
    matmul_fixed_order(aa, x, y, r, r, c, threads);
    for (int64_t i = 0; i < rc; ++i) x[i] = kNewtonSchulzA * x[i] + y[i];
  }
  if (tall) {
    transpose(x, r, c, out);
  } else {
    std::memcpy(out, x, static_cast<size_t>(rc) * sizeof(float));
  }
}

}  // namespace zs::optim
