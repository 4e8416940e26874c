// AdamW over one span of fp32 master weights. Knows nothing of ranks or sharding: the engine
// calls it on each contiguous piece of this rank's shard.
//
// [Note: AdamW operation order] Per element, in this order, in fp32, with no fused multiply-add
// (the project builds with -ffp-contract=off), so that every implementation (this reference, the
// SIMD CPU Adam in offload/, the CUDA kernel) gives the same bits:
//   g  = grad * grad_scale                 (grad read as fp32 from fp32/bf16/fp16)
//   p  = p * decay                         (decay = 1 - lr * weight_decay)
//   m  = m * beta1 + g * (1 - beta1)
//   v  = v * beta2 + (g * g) * (1 - beta2)
//   p  = p - step_size * (m / (sqrt(v) / bias2_sqrt + eps))
// with step_size = lr / (1 - beta1^t) and bias2_sqrt = sqrt(1 - beta2^t), t the 1-based step.
// When `out` is non-null, out[i] = p rounded to out_dtype (the compute-dtype parameter copy).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::optim {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// The per-step scalars every element uses; computed once per step by make_adamw_step().
struct AdamWStep {
  float decay = 1.0f;  // 1 - lr * weight_decay (1 for parameters without decay)
  float beta1 = 0.9f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.95f;
  float one_minus_beta2 = 0.05f;
  float step_size = 0.0f;   // lr / (1 - beta1^t)
  float bias2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float grad_scale = 1.0f;  // multiplies the raw gradient: unscale, averaging, clipping
};

// t >= 1. with_decay selects weight_decay or 0 for this span.
AdamWStep make_adamw_step(const AdamWConfig& cfg, float lr, int64_t t, float grad_scale,
                          bool with_decay);

// The scalar reference: p, m, v fp32 of n elements; grad of grad_dtype (fp32, bf16, fp16);
// out (may be null) of out_dtype (fp32, bf16, fp16). In place; spans must not overlap except
// that `out` may alias p when out_dtype is fp32.
void adamw_reference(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
                     const AdamWStep& s, void* out, DType out_dtype);

}  // namespace zs::optim
