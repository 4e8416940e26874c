#include "nn/cuda/attention.h"

#include <cmath>

#include "core/error.h"
#include "device/cuda/cuda_error.h"
#include "nn/cuda/kernels.h"

namespace zs::nn::gpu {

namespace {
CudaGemmDesc batched(int64_t bh, int64_t m, int64_t n, int64_t k, bool ta, bool tb, DType dt,
                     float alpha) {
  CudaGemmDesc d;
  d.batch = bh;
  d.m = m;
  d.n = n;
  d.k = k;
  d.trans_a = ta;
  d.trans_b = tb;
  d.dtype = dt;
  d.alpha = alpha;
  return d;
}
}  // namespace

CudaAttention::CudaAttention(CublasContext& ctx, int B, int T, int C, int H, DType mm)
    : B_(B), T_(T), C_(C), H_(H), mm_(mm) {
  ZS_CHECK(B > 0 && T > 0 && H > 0 && C > 0 && C % H == 0, ErrorCode::kInvalidArgument,
           "cuda attention: B {} T {} C {} H {} (C must divide by H)", B, T, C, H);
  hd_ = C / H;
  const int64_t bh = static_cast<int64_t>(B) * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  qk_ = CudaGemm(ctx, batched(bh, T, T, hd_, false, true, mm, scale));   // S = Q K^T * scale
  pv_ = CudaGemm(ctx, batched(bh, T, hd_, T, false, false, mm, 1.0f));   // O = P V
  dp_ = CudaGemm(ctx, batched(bh, T, T, hd_, false, true, mm, 1.0f));    // dP = dO V^T
  dv_ = CudaGemm(ctx, batched(bh, T, hd_, T, true, false, mm, 1.0f));    // dV = P^T dO
  dq_ = CudaGemm(ctx, batched(bh, T, hd_, T, false, false, mm, scale));  // dQ = dS K * scale
  dk_ = CudaGemm(ctx, batched(bh, T, hd_, T, true, false, mm, scale));   // dK = dS^T Q * scale
}

void CudaAttention::forward(const float* qkv, const AttentionActs& a, const AttentionWork& w,
                            void* out, cudaStream_t stream) {
  const int64_t bh = static_cast<int64_t>(B_) * H_;
  cuda_check(attention_split_heads(qkv, a.q, a.k, a.v, mm_, B_, T_, C_, H_, stream),
             "attention_split_heads");
  qk_.run(a.q, a.k, w.s, stream);
  // P in fp32 for backward; in mm as the GEMM input (written by the same kernel).
  void* pm = mm_ == DType::kF32 ? nullptr : a.pm;
  cuda_check(causal_softmax_forward(w.s, a.p, pm, mm_, bh, T_, stream), "causal_softmax_forward");
  pv_.run(mm_ == DType::kF32 ? static_cast<const void*>(a.p) : a.pm, a.v, w.o, stream);
  cuda_check(attention_merge_heads(w.o, out, mm_, B_, T_, C_, H_, stream), "attention_merge_heads");
}

void CudaAttention::backward(const float* dout, const AttentionActs& a, const AttentionWork& w,
                             float* dqkv, cudaStream_t stream) {
  const int64_t bh = static_cast<int64_t>(B_) * H_;
  const void* pm = mm_ == DType::kF32 ? static_cast<const void*>(a.p) : a.pm;
  cuda_check(attention_split_grad(dout, w.dom, mm_, B_, T_, C_, H_, stream),
             "attention_split_grad");
  dp_.run(w.dom, a.v, w.s, stream);  // dP [T, T] per head
  dv_.run(pm, w.dom, w.dv, stream);  // dV = P^T dO
  void* dsm = mm_ == DType::kF32 ? nullptr : w.dsm;
  cuda_check(causal_softmax_backward(a.p, w.s, w.s, dsm, mm_, bh, T_, stream),
             "causal_softmax_backward");
  const void* ds = mm_ == DType::kF32 ? static_cast<const void*>(w.s) : w.dsm;
  dq_.run(ds, a.k, w.dq, stream);
  dk_.run(ds, a.q, w.dk, stream);
  cuda_check(attention_merge_grads(w.dq, w.dk, w.dv, dqkv, B_, T_, C_, H_, stream),
             "attention_merge_grads");
}

}  // namespace zs::nn::gpu
