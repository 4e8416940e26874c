#include "optim/muon.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"

namespace zs::optim {

MuonStep make_muon_step(float lr, float weight_decay, bool with_decay, int64_t rows, int64_t cols) {
  MuonStep s;
  s.decay = with_decay ? 1.0f - lr * weight_decay : 1.0f;
  const float scale = 0.2f * std::sqrt(static_cast<float>(std::max(rows, cols)));
  s.step = lr * scale;
  return s;
}

void muon_momentum(const void* grad, DType grad_dtype, float grad_scale, float momentum, float* buf,
                   float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load_as_fp32(grad, grad_dtype, static_cast<size_t>(i)) * grad_scale;
    buf[i] = momentum * buf[i] + g;
    u[i] = g + momentum * buf[i];
  }
}

void muon_apply(float* p, const float* o, int64_t n, const MuonStep& s, void* out,
                DType out_dtype) {
  for (int64_t i = 0; i < n; ++i) {
    p[i] = p[i] * s.decay;
    p[i] = p[i] - s.step * o[i];
    if (out != nullptr) store_from_fp32(out, out_dtype, static_cast<size_t>(i), p[i]);
  }
}

}  // namespace zs::optim
