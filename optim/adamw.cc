#include "optim/adamw.h"

#include <cmath>

#include "core/convert.h"

namespace zs::optim {

AdamWStep make_adamw_step(const AdamWConfig& cfg, float lr, int64_t t, float grad_scale,
                          bool with_decay) {
  AdamWStep s;
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), static_cast<double>(t));
  s.decay = with_decay ? 1.0f - lr * cfg.weight_decay : 1.0f;
  s.beta1 = cfg.beta1;
  s.one_minus_beta1 = 1.0f - cfg.beta1;
  s.beta2 = cfg.beta2;
  s.one_minus_beta2 = 1.0f - cfg.beta2;
  s.step_size = static_cast<float>(lr / bc1);
  s.bias2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.eps = cfg.eps;
  s.grad_scale = grad_scale;
  return s;
}

void adamw_reference(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
                     const AdamWStep& s, void* out, DType out_dtype) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load_as_fp32(grad, grad_dtype, static_cast<size_t>(i)) * s.grad_scale;
    float pi = p[i] * s.decay;
    const float mi = m[i] * s.beta1 + g * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + (g * g) * s.one_minus_beta2;
    pi = pi - s.step_size * (mi / (std::sqrt(vi) / s.bias2_sqrt + s.eps));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (out != nullptr) store_from_fp32(out, out_dtype, static_cast<size_t>(i), pi);
  }
}

}  // namespace zs::optim
