// Rotary position embedding in Hugging Face's rotate_half convention, forward and backward.
#include <cmath>
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
  std::vector<float> cos, sin;
};
RopeTable rope_table(int T, int hd, float theta) {
  const int half = hd / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), e));
  }
  RopeTable tab{std::vector<float>(static_cast<size_t>(T) * half),
                std::vector<float>(static_cast<size_t>(T) * half)};
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const double a = static_cast<float>(t) * inv_freq[i];
      tab.cos[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(a));
      tab.sin[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(a));
    }
  return tab;
}

// One head: (x1, x2) <- (x1 c - x2 s', x2 c + x1 s'), s' = sign * s (sign -1: the transpose).
ZS_SIMD_BODY(void, rope_head, (float* x, const float* c, const float* s, int half, float sign)) {
  float* x2 = x + half;
  for (int i = 0; i < half; ++i) {
    const float a = x[i], b = x2[i], sn = sign * s[i];
    x[i] = a * c[i] - b * sn;
    x2[i] = b * c[i] + a * sn;
  }
}
ZS_SIMD_DISPATCH(void, rope_head, (float* x, const float* c, const float* s, int half, float sign),
                 (x, c, s, half, sign))

void rope_apply(float* x, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                float sign) {
  ZS_CHECK(hd % 2 == 0 && T > 0, ErrorCode::kInvalidArgument,
           "rope: head dim {} must be even and T {} positive", hd, T);
  const int half = hd / 2;
  const RopeTable tab = rope_table(T, hd, theta);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    for (int h = 0; h < heads; ++h)
      rope_head(x + r * ld + static_cast<int64_t>(h) * hd, tab.cos.data() + t * half,
                tab.sin.data() + t * half, half, sign);
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
