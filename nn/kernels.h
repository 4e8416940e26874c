// Elementwise and row-wise kernels of the CPU layers, fp32 activations, OpenMP over rows with a
// static schedule (results do not depend on the thread count unless noted). Matrix products are
// in gemm.h. Shapes in the comments: M rows (B*T tokens), C/N columns.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "nn/rope_scaling.h"
#include "unit/unit.h"

namespace zs::nn {

constexpr int kMaxRow = 16384;  // the widest layer-norm row (model width) the kernels accept

// dst[off .. off+n) = src converted to dt (fp32 or bf16, round to nearest even).
void store_as(const float* src, void* dst, DType dt, int64_t off, int64_t n);
// dst[0..n) = p's values as fp32 (any float dtype of a parameter).
void param_to_fp32(const ParamView& p, float* dst);

// out[b*T + t, :] = wte[tokens[b*T+t], :] + wpe[t, :]; tokens [B*T], out [B*T, C] fp32.
void embedding_forward(const int32_t* tokens, int B, int T, int C, const ParamView& wte,
                       const ParamView& wpe, float* out);
// The same with wpe optional: null (rotary positions) gives out = wte[tokens] alone.
void embedding_forward(const int32_t* tokens, int B, int T, int C, const ParamView& wte,
                       const ParamView* wpe, float* out);
// dwte[tokens[i], :] += dout[i, :]; dwpe[t, :] += sum_b dout[b*T + t, :]. A null dwte or dwpe
// is skipped (a frozen table).
void embedding_backward(const int32_t* tokens, int B, int T, int C, const float* dout, float* dwte,
                        float* dwpe);

// out = (x - mean) * rstd * w + b per row, rstd = 1 / sqrt(var + eps), written in dt; mean, rstd
// [M] kept.
void layernorm_forward(const float* x, const float* w, const float* b, int64_t M, int C, void* out,
                       DType dt, float* mean, float* rstd, float eps = 1e-5f);
// dx += dLN/dx (accumulates), dw += sum_rows dy * xhat, db += sum_rows dy. A null dw or db is
// skipped (frozen norm parameters); dx is the same bits either way.
void layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                        const float* dy, int64_t M, int C, float* dx, float* dw, float* db);

// Llama's RMSNorm: out = x * rstd * w per row, rstd = 1 / sqrt(mean(x^2) + eps), no mean
// subtraction and no bias; written in dt; rstd [M] kept for backward.
void rmsnorm_forward(const float* x, const float* w, int64_t M, int C, float eps, void* out,
                     DType dt, float* rstd);
// dx += dRMS/dx (accumulates), dw += sum_rows dy * x * rstd. A null dw is skipped (frozen weight);
// dx is the same bits either way.
void rmsnorm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t M,
                      int C, float* dx, float* dw);

// Qwen3's per-head q/k RMSNorm, in place on `heads` heads of hd dims at the start of each row of
// x [rows, ld] (head h at columns h*hd, as rope_forward): each head's vector v <- v rstd w, rstd =
// 1 / sqrt(mean(v^2) + eps), w [hd] shared by the heads. saved [rows, heads hd] receives the
// input and rstd [rows, heads] the statistics, for backward. Deterministic; bitwise
// rmsnorm_forward on each head's row.
void rmsnorm_heads_forward(float* x, int64_t rows, int heads, int hd, int64_t ld, const float* w,
                           float eps, float* saved, float* rstd);
// Its backward in place on dx of the same layout: on entry dy, on exit dL/dv (overwrites). dw +=
// the sum over rows and heads of dy v rstd, each column summed by one thread in (row, head) order
// (the same bits at any thread count); a null dw is skipped (frozen weight).
void rmsnorm_heads_backward(float* dx, int64_t rows, int heads, int hd, int64_t ld, const float* w,
                            const float* saved, const float* rstd, float* dw);

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), written in dt.
void gelu_forward(const float* x, void* out, DType dt, int64_t n);
// dx = dy * gelu'(x); dx may alias dy.
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
// The fused form the model uses: out = gelu(x) (in dt) and x is overwritten with gelu'(x), the
// only thing backward needs, so backward is one multiply (gelu_backward_saved) and no tanh is
// recomputed. Same values as gelu_forward / gelu_backward.
void gelu_forward_save_grad(float* x, void* out, DType dt, int64_t n);
// dx = dy * saved (saved = gelu'(x) from gelu_forward_save_grad); dx may alias dy.
void gelu_backward_saved(const float* saved, const float* dy, float* dx, int64_t n);

// Llama's MLP gate: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), elementwise over the two
// halves the caller passes (gate_proj's and up_proj's outputs, n each); written in dt.
void swiglu_forward(const float* gate, const float* up, void* out, DType dt, int64_t n);
// dgate = dy * up * silu'(gate), dup = dy * silu(gate) (overwrites). dgate may alias gate or dy,
// dup may alias up or dy (not both the same one).
void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                     int64_t n);

// The same over the rows of the fused fc output the model keeps: gate_up [M, 2F] holds gate_proj's
// output in columns [0, F) and up_proj's in [F, 2F); out [M, F] in dt.
void swiglu_forward_rows(const float* gate_up, int64_t M, int F, void* out, DType dt);
// dy [M, F] -> dgate_up [M, 2F] (dgate | dup per row, overwrites); dgate_up must not alias
// gate_up or dy.
void swiglu_backward_rows(const float* gate_up, const float* dy, int64_t M, int F, float* dgate_up);

// Rotary position embedding (transformers' apply_rotary_pos_emb with rotate_half), in place on
// `heads` heads of hd (even) dims at the start of each row of x [rows, ld] (head h at columns
// h*hd, as Attention's qkv: call once on q with x = qkv, once on k with x = qkv + C). Row r is at
// position r % T. For i < hd/2, a = t * inv_freq[i], inv_freq = rope_inv_freq(hd, theta, scaling)
// (theta^(-2i/hd) unscaled; fp32, as transformers computes it; nn/rope_scaling.h):
//   x[i] <- x[i] cos a - x[i + hd/2] sin a,  x[i + hd/2] <- x[i + hd/2] cos a + x[i] sin a.
void rope_forward(float* x, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                  const RopeScaling& scaling = {});
// The transpose of rope_forward (the rotation by -a), in place on dx of the same layout.
void rope_backward(float* dx, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                   const RopeScaling& scaling = {});

// out = a + b; out may alias either.
void residual_add(const float* a, const float* b, float* out, int64_t n);
// db[j] += sum_i dy[i, j], dy [M, N].
void bias_backward(const float* dy, int64_t M, int N, float* db);

// p[r, j] = softmax over j <= (r mod T) of s[r, :], 0 for j > (r mod T); s, p [BH*T, T].
void causal_softmax_forward(const float* s, float* p, int64_t BH, int T);
// ds = p * (dp - sum_j p dp) per row; ds may alias dp.
void causal_softmax_backward(const float* p, const float* dp, float* ds, int64_t BH, int T);

// Softmax cross-entropy per row of logits [M, V]: probs (may alias logits) = softmax, row_loss[i]
// = logsumexp - logit[target]. Returns the mean loss (summed in double, in row order).
double cross_entropy_forward(const float* logits, const int32_t* targets, int64_t M, int V,
                             float* probs, float* row_loss);
// dlogits = (probs - onehot(target)) * scale / M; dlogits may alias probs.
void cross_entropy_backward(const float* probs, const int32_t* targets, int64_t M, int V,
                            float scale, float* dlogits);
// The two halves of cross_entropy_forward, for a head that runs its rows in chunks
// (nn/lm_head.h): probs and row_loss of `rows` rows, then the mean of M row losses (summed in
// double, in row order). cross_entropy_forward is cross_entropy_rows then mean_row_loss, the same
// bits.
void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int V,
                        float* probs, float* row_loss);
double mean_row_loss(const float* row_loss, int64_t M);
// cross_entropy_backward over `rows` rows with the factor k = scale / M given (M the rows of the
// whole batch): dlogits = (probs - onehot(target)) * k; dlogits may alias probs.
void cross_entropy_backward_rows(const float* probs, const int32_t* targets, int64_t rows, int V,
                                 float k, float* dlogits);

}  // namespace zs::nn
