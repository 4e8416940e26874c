#include "optim/sgd.h"

#include "core/convert.h"

namespace zs::optim {

void sgd_update(float* p, const void* grad, DType grad_dtype, float* buf, int64_t n,
                const SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
                DType out_dtype) {
  const float wd = with_decay ? cfg.weight_decay : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float g = load_as_fp32(grad, grad_dtype, static_cast<size_t>(i)) * grad_scale + wd * p[i];
    if (cfg.momentum != 0.0f) {
      buf[i] = cfg.momentum * buf[i] + g;
      g = buf[i];
    }
    p[i] = p[i] - lr * g;
    if (out != nullptr) store_from_fp32(out, out_dtype, static_cast<size_t>(i), p[i]);
  }
}

}  // namespace zs::optim
