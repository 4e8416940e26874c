#include "nn/lora.h"

#include "nn/kernels.h"

namespace zs::nn {

std::array<GemmDesc, 6> LoraAdapter::gemm_descs(int64_t M, int64_t in, int64_t out, int64_t rank,
                                                int64_t ld_out, DType mm, float scale) {
  auto desc = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, float alpha, bool acc) {
    GemmDesc g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.trans_a = ta;
    g.trans_b = tb;
    g.dtype = mm;
    g.alpha = alpha;
    g.accumulate = acc;
    return g;
  };
  std::array<GemmDesc, 6> g = {
      desc(M, rank, in, false, true, 1.0f, false),    // u = x A^T, A stored [r][in] = [n][k]
      desc(M, out, rank, false, true, scale, true),   // y += s u B^T, B stored [out][r] = [n][k]
      desc(out, rank, M, true, false, scale, true),   // dB += s dy^T u, dy stored [M][out] = [k][m]
      desc(M, rank, out, false, false, 1.0f, false),  // v = dy B, B stored [out][r] = [k][n]
      desc(rank, in, M, true, false, scale, true),    // dA += s v^T x, v stored [M][r] = [k][m]
      desc(M, in, rank, false, false, scale, true),   // dx += s v A, A stored [r][in] = [k][n]
  };
  // A part of a fused linear's output: y and dy rows are ld_out apart.
  if (ld_out > 0 && ld_out != out) {
    g[1].ldc = ld_out;
    g[2].lda = ld_out;
    g[3].lda = ld_out;
  }
  return g;
}

LoraAdapter::LoraAdapter(int64_t M, int64_t in, int64_t out, int64_t rank, float scale, DType mm,
                         MemoryTracker* tracker, GemmWorkspace* ws, int64_t ld_out)
    : M_(M), rank_(rank), mm_(mm) {
  const std::array<GemmDesc, 6> g = gemm_descs(M, in, out, rank, ld_out, mm, scale);
  fwd_u_ = Gemm(g[0], tracker, ws);
  fwd_y_ = Gemm(g[1], tracker, ws);
  bwd_db_ = Gemm(g[2], tracker, ws);
  bwd_v_ = Gemm(g[3], tracker, ws);
  bwd_da_ = Gemm(g[4], tracker, ws);
  bwd_dx_ = Gemm(g[5], tracker, ws);
}

int64_t LoraAdapter::scratchpad_bytes() const {
  size_t b = 0;
  for (const Gemm* g : {&fwd_u_, &fwd_y_, &bwd_db_, &bwd_v_, &bwd_da_, &bwd_dx_})
    b += g->scratchpad_bytes();
  return static_cast<int64_t>(b);
}

void LoraAdapter::forward(const void* x, const void* a, const void* b, float* u32, void* u,
                          float* y) {
  if (mm_ == DType::kF32) {
    fwd_u_.run(x, a, static_cast<float*>(u));
  } else {
    fwd_u_.run(x, a, u32);
    store_as(u32, u, mm_, 0, M_ * rank_);
  }
  fwd_y_.run(u, b, y);
}

void LoraAdapter::backward(const void* dy, const void* x, const void* u, const void* a,
                           const void* b, float* v32, void* v, float* dx, float* da, float* db) {
  if (db != nullptr) bwd_db_.run(dy, u, db);
  bwd_v_.run(dy, b, v32);
  const void* vm = v32;
  if (mm_ != DType::kF32) {
    store_as(v32, v, mm_, 0, M_ * rank_);
    vm = v;
  }
  if (da != nullptr) bwd_da_.run(vm, x, da);
  bwd_dx_.run(vm, a, dx);
}

}  // namespace zs::nn
