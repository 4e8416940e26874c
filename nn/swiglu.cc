// SwiGLU, the gate of Llama's MLP (down(silu(gate(x)) * up(x))): forward and backward.
#include <algorithm>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
constexpr int kChunk = 1024;  // elements per call of the chunk kernels (their stack tiles)

// [Note: sigmoid tile] The chunk kernels write s = sigmoid(g) = 1 / (1 + exp(-g)) into a stack
// tile in one loop and form the products in a second. Fused in one loop, GCC evaluates the
// clamped branch of exp_approx as a constant (sigmoid(-88) = 6.05e-39, subnormal) times g on
// every lane and then selects, and each multiply with a subnormal operand costs a microcode assist
// (~6.7 ns per element forward instead of ~1 on this Xeon; with DAZ set the fused loop runs at
// full speed, which is how it was found). The tile keeps the same operations in the same order:
// the same bits at every level. Aliasing is no obstacle: GCC's run-time overlap check admits an
// output equal to an input (the same element read, then written), so the backward's in-place
// calls take the vector loop too (measured: 1.6 ns per element in place).
[[gnu::always_inline]] inline void sigmoid_tile(const float* g, float* s, int n) {
  for (int i = 0; i < n; ++i) s[i] = 1.0f / (1.0f + simd::exp_approx(-g[i]));
}

ZS_SIMD_BODY(void, swiglu_chunk, (const float* gate, const float* up, float* y, int n)) {
  ZS_ASSERT(n <= kChunk);
  alignas(64) float s[kChunk];
  sigmoid_tile(gate, s, n);
  for (int i = 0; i < n; ++i) y[i] = gate[i] * s[i] * up[i];
}
ZS_SIMD_DISPATCH(void, swiglu_chunk, (const float* gate, const float* up, float* y, int n),
                 (gate, up, y, n))

// silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). Every input of element i is read before either
// output of element i is written, so an output may alias an input (the contract in kernels.h).
ZS_SIMD_BODY(void, swiglu_grad_chunk,
             (const float* gate, const float* up, const float* dy, float* dgate, float* dup,
              int n)) {
  ZS_ASSERT(n <= kChunk);
  alignas(64) float s[kChunk];
  sigmoid_tile(gate, s, n);
  for (int i = 0; i < n; ++i) {
    const float g = gate[i], u = up[i], d = dy[i], si = s[i];
    dgate[i] = d * u * (si * (1.0f + g * (1.0f - si)));
    dup[i] = d * (g * si);
  }
}
ZS_SIMD_DISPATCH(void, swiglu_grad_chunk,
                 (const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                  int n),
                 (gate, up, dy, dgate, dup, n))
}  // namespace

void swiglu_forward(const float* gate, const float* up, void* out, DType dt, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    const int len = static_cast<int>(std::min<int64_t>(kChunk, n - off));
    if (dt == DType::kF32) {
      swiglu_chunk(gate + off, up + off, static_cast<float*>(out) + off, len);
    } else {
      alignas(64) float tmp[kChunk];
      swiglu_chunk(gate + off, up + off, tmp, len);
      store_as(tmp, out, dt, off, len);
    }
  }
}

void swiglu_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                     int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    const int len = static_cast<int>(std::min<int64_t>(kChunk, n - off));
    swiglu_grad_chunk(gate + off, up + off, dy + off, dgate + off, dup + off, len);
  }
}

}  // namespace zs::nn

namespace zs::nn {

void swiglu_forward_rows(const float* gate_up, int64_t M, int F, void* out, DType dt) {
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const float* gate = gate_up + m * 2 * F;
    for (int c = 0; c < F; c += kChunk) {
      const int len = std::min(kChunk, F - c);
      const int64_t off = m * F + c;
      if (dt == DType::kF32) {
        swiglu_chunk(gate + c, gate + F + c, static_cast<float*>(out) + off, len);
      } else {
        alignas(64) float tmp[kChunk];
        swiglu_chunk(gate + c, gate + F + c, tmp, len);
        store_as(tmp, out, dt, off, len);
      }
    }
  }
}

void swiglu_backward_rows(const float* gate_up, const float* dy, int64_t M, int F,
                          float* dgate_up) {
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const float* gate = gate_up + m * 2 * F;
    float* dgate = dgate_up + m * 2 * F;
    const float* d = dy + m * F;
    for (int c = 0; c < F; c += kChunk) {
      const int len = std::min(kChunk, F - c);
      swiglu_grad_chunk(gate + c, gate + F + c, d + c, dgate + c, dgate + F + c, len);
    }
  }
}

}  // namespace zs::nn
