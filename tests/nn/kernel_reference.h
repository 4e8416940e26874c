// Plain scalar loops of the dispatched row kernels (nn/kernels.h), for kernel_isa_test: the same
// operations in the same order as the kernels, compiled with the vectorizers off
// (tests/nn/CMakeLists.txt), so each kernel can be compared with them bit for bit at every ISA
// level. Shapes and aliasing as in nn/kernels.h; outputs never alias inputs here.
#pragma once

#include <cstdint>

namespace zs::nn::kernel_ref {

// y[i] = g * sigmoid(g) * up[i], g = gate[i], sigmoid(g) = 1 / (1 + exp_approx(-g)).
void swiglu_forward(const float* gate, const float* up, float* y, int64_t n);
// dgate = dy * up * (s (1 + g (1 - s))), dup = dy * (g s), s = sigmoid(g).
void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                     int64_t n);
// One row of the causal softmax: p[0..n) = softmax(s[0..n)), p[n..T) = 0.
void softmax_row(const float* s, int n, int T, float* p);
// One row of its backward: ds[j] = p[j] (dp[j] - row_dot(p, dp)) for j < n, 0 up to T.
void softmax_grad_row(const float* p, const float* dp, int n, int T, float* ds);
// One row of cross-entropy: probs[0..V) = softmax(logits); returns log(sum) + max - logits[target].
float cross_entropy_row(const float* logits, int V, int target, float* probs);
// One row of its backward: d = probs * k, d[target] = (probs[target] - 1) * k.
void cross_entropy_grad_row(const float* probs, int V, int target, float k, float* d);
// One RMSNorm row of C: rstd = 1 / sqrt(row_dot(x, x) / C + eps), y = x * rstd * w; returns rstd.
float rmsnorm_row(const float* x, const float* w, int C, float eps, float* y);
// Its backward for one row: dx += rstd (dy w - x rstd * row_dot(dy w, x rstd) / C).
void rmsnorm_grad_row(const float* x, const float* w, float rstd, const float* dy, int C,
                      float* dx);
// dw[j] += sum over the M rows, in row order, of dy[i, j] * (x[i, j] * rstd[i]).
void rmsnorm_weight_grad(const float* x, const float* rstd, const float* dy, int64_t M, int C,
                         float* dw);
// One row's rotary embedding at position t over `heads` heads of hd dims (sign -1: the transpose):
// a = float(t) * (1 / float(theta^(2i/hd))), c = float(cos(a)), s = sign * float(sin(a)),
// (x[i], x[i + hd/2]) <- (x[i] c - x[i + hd/2] s, x[i + hd/2] c + x[i] s).
void rope_row(float* x, int t, int heads, int hd, float theta, float sign);

}  // namespace zs::nn::kernel_ref
