// SGD with momentum over one span of fp32 master weights (PyTorch's formulation, coupled weight
// decay): g = grad * grad_scale + weight_decay * p; buf = momentum * buf + g; p = p - lr * buf.
// With momentum 0 the buffer is not touched (may be null).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::optim {

struct SgdConfig {
  float momentum = 0.9f;
  float weight_decay = 0.0f;
};

void sgd_update(float* p, const void* grad, DType grad_dtype, float* momentum_buf, int64_t n,
                const SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
                DType out_dtype);

}  // namespace zs::optim
