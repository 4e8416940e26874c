// Rotary position embedding in Hugging Face's rotate_half convention, forward and backward.
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
// cos and sin [T, hd/2] of a = t * inv_freq[i], inv_freq[i] = 1 / theta^(2i/hd), each step in fp32
// as transformers' LlamaRotaryEmbedding does (so positions far out round alike); cos and sin of
// the fp32 angle rounded from double.
struct RopeTable {
  int T = 0, hd = 0;
  float theta = 0.0f;
  std::vector<float> cos, sin;
};
RopeTable rope_table(int T, int hd, float theta) {
  const int half = hd / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), e));
  }
  RopeTable tab{T, hd, theta, std::vector<float>(static_cast<size_t>(T) * half),
                std::vector<float>(static_cast<size_t>(T) * half)};
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const double a = static_cast<float>(t) * inv_freq[i];
      tab.cos[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(a));
      tab.sin[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(a));
    }
  return tab;
}

// The table of the last (T, hd, theta) asked for, kept: a model asks for the same one at every call
// (4 per layer and step), and building it (T hd cos and sin in double) cost ~70 us at T = 128,
// hd = 32, as much as rotating 1024 rows. The same values either way. Thread-safe; a caller keeps
// its table alive while another replaces the cached one.
std::shared_ptr<const RopeTable> cached_rope_table(int T, int hd, float theta) {
  static std::mutex mu;
  static std::shared_ptr<const RopeTable> last;
  std::lock_guard<std::mutex> lock(mu);
  if (!last || last->T != T || last->hd != hd || last->theta != theta)
    last = std::make_shared<const RopeTable>(rope_table(T, hd, theta));
  return last;
}

// One row: each of `heads` heads of hd = 2 half dims at x + h hd, (x1, x2) <- (x1 c - x2 s',
// x2 c + x1 s'), s' = sign * s (sign -1: the transpose). The heads loop is inside the dispatched
// body: one dispatch per row, not per head (a 16-element head at hd = 32 spent more on the call
// than on the rotation).
ZS_SIMD_BODY(void, rope_row,
             (float* x, const float* c, const float* s, int heads, int half, float sign)) {
  for (int h = 0; h < heads; ++h) {
    float* x1 = x + static_cast<int64_t>(h) * 2 * half;
    float* x2 = x1 + half;
    for (int i = 0; i < half; ++i) {
      const float a = x1[i], b = x2[i], sn = sign * s[i];
      x1[i] = a * c[i] - b * sn;
      x2[i] = b * c[i] + a * sn;
    }
  }
}
ZS_SIMD_DISPATCH(void, rope_row,
                 (float* x, const float* c, const float* s, int heads, int half, float sign),
                 (x, c, s, heads, half, sign))

void rope_apply(float* x, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                float sign) {
  ZS_CHECK(hd % 2 == 0 && T > 0, ErrorCode::kInvalidArgument,
           "rope: head dim {} must be even and T {} positive", hd, T);
  const int half = hd / 2;
  const std::shared_ptr<const RopeTable> table = cached_rope_table(T, hd, theta);
  const RopeTable& tab = *table;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    rope_row(x + r * ld, tab.cos.data() + t * half, tab.sin.data() + t * half, heads, half, sign);
  }
}
}  // namespace

void rope_forward(float* x, int64_t rows, int T, int heads, int hd, int64_t ld, float theta) {
  rope_apply(x, rows, T, heads, hd, ld, theta, 1.0f);
}

void rope_backward(float* dx, int64_t rows, int T, int heads, int hd, int64_t ld, float theta) {
  rope_apply(dx, rows, T, heads, hd, ld, theta, -1.0f);
}

}  // namespace zs::nn
