// Muon's element-wise parts over one span of a matrix (Keller Jordan's Muon with Nesterov
// momentum, Moonlight's scale and decoupled weight decay); the orthogonalisation between them is
// optim/newton_schulz.h. Knows nothing of ranks or sharding.
//
// [Note: Muon operation order] Per element, in fp32, no fused multiply-add:
//   g = grad * grad_scale                  (grad read as fp32 from fp32/bf16/fp16)
//   B = momentum * B + g                   (the momentum buffer)
//   u = g + momentum * B                   (Nesterov)
// then, once the whole matrix's u is known, O = newton_schulz(u) and per element
//   p = p * decay                          (decay = 1 - lr * weight_decay; 1 without decay)
//   p = p - step * O                       (step = lr * 0.2 * sqrt(max(rows, cols)))
// The scale makes the update's RMS about AdamW's (Moonlight, "Muon is Scalable for LLM
// Training"), so AdamW's learning rate and weight decay carry over.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::optim {

struct MuonConfig {
  float momentum = 0.95f;  // in [0, 1)
  int ns_steps = 5;        // Newton-Schulz iterations, 1..100
};

// The per-step scalars of one matrix's apply.
struct MuonStep {
  float decay = 1.0f;  // 1 - lr * weight_decay
  float step = 0.0f;   // lr * 0.2 * sqrt(max(rows, cols))
};
MuonStep make_muon_step(float lr, float weight_decay, bool with_decay, int64_t rows, int64_t cols);

// buf and u fp32 of n elements, grad of grad_dtype (fp32, bf16, fp16): the momentum update and
// the Nesterov u (above). u must not overlap buf or grad.
void muon_momentum(const void* grad, DType grad_dtype, float grad_scale, float momentum, float* buf,
                   float* u, int64_t n);

// p fp32 of n elements, o the orthogonalised update's matching elements: p = p * decay - ...
// (above). When `out` is non-null, out[i] = p rounded to out_dtype (the compute-dtype copy).
void muon_apply(float* p, const float* o, int64_t n, const MuonStep& s, void* out, DType out_dtype);

}  // namespace zs::optim
