// Rotary position embedding in Hugging Face's rotate_half convention, forward and backward, and
// its inverse frequencies with rope scaling (nn/rope_scaling.h).
#include <charconv>
#include <cmath>
#include <memory>
#include <mutex>
#include <numbers>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/rope_scaling.h"
#include "nn/simd.h"

namespace zs::nn {

namespace {
constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

// llama3's stretch of one fp32 inverse frequency, operation by operation as
// _compute_llama3_parameters does it on fp32 tensors with Python scalars: a scalar meeting the
// tensor is rounded to fp32 first, `scalar / tensor` is tensor.reciprocal() * scalar (torch's
// __rtruediv__), and the wavelength bounds and high - low stay in double until they meet it.
float llama3_inv_freq(float inv, const RopeScaling& s) {
  const float factor = static_cast<float>(s.factor);
  const double orig = s.original_context;
  const float low_wavelen = static_cast<float>(orig / s.low_freq_factor);
  const float high_wavelen = static_cast<float>(orig / s.high_freq_factor);
  const float wavelen = (1.0f / inv) * static_cast<float>(2 * std::numbers::pi);
  if (wavelen > low_wavelen) return inv / factor;  // low frequency: divided by factor
  if (wavelen < high_wavelen) return inv;          // high frequency: kept
  // Between: blended. Each line one fp32 tensor operation (-ffp-contract=off keeps them apart).
  const float ratio = (1.0f / wavelen) * static_cast<float>(orig);
  const float smooth = (ratio - static_cast<float>(s.low_freq_factor)) /
                       static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  const float scaled = ((1.0f - smooth) * inv) / factor;
  return scaled + smooth * inv;
}

// cos and sin [T, hd/2] of a = t * inv_freq[i] (rope_inv_freq), in fp32 as transformers'
// LlamaRotaryEmbedding does (so positions far out round alike); cos and sin of the fp32 angle
// rounded from double.
struct RopeTable {
  int T = 0, hd = 0;
  float theta = 0.0f;
  RopeScaling scaling;
  std::vector<float> cos, sin;
};
RopeTable rope_table(int T, int hd, float theta, const RopeScaling& scaling) {
  const int half = hd / 2;
  const std::vector<float> inv_freq = rope_inv_freq(hd, theta, scaling);
  RopeTable tab{T,
                hd,
                theta,
                scaling,
                std::vector<float>(static_cast<size_t>(T) * half),
                std::vector<float>(static_cast<size_t>(T) * half)};
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const double a = static_cast<float>(t) * inv_freq[i];
      tab.cos[static_cast<size_t>(t) * half + i] = static_cast<float>(std::cos(a));
      tab.sin[static_cast<size_t>(t) * half + i] = static_cast<float>(std::sin(a));
    }
  return tab;
}

// The table of the last (T, hd, theta, scaling) asked for, kept: a model asks for the same one at
// every call (4 per layer and step), and building it (T hd cos and sin in double) cost ~70 us at
// T = 128, hd = 32, as much as rotating 1024 rows. The same values either way. Thread-safe; a
// caller keeps its table alive while another replaces the cached one.
std::shared_ptr<const RopeTable> cached_rope_table(int T, int hd, float theta,
                                                   const RopeScaling& scaling) {
  static std::mutex mu;
  static std::shared_ptr<const RopeTable> last;
  std::lock_guard<std::mutex> lock(mu);
  if (!last || last->T != T || last->hd != hd || last->theta != theta || last->scaling != scaling)
    last = std::make_shared<const RopeTable>(rope_table(T, hd, theta, scaling));
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
                const RopeScaling& scaling, float sign) {
  ZS_CHECK(hd % 2 == 0 && T > 0, ErrorCode::kInvalidArgument,
           "rope: head dim {} must be even and T {} positive", hd, T);
  const int half = hd / 2;
  const std::shared_ptr<const RopeTable> table = cached_rope_table(T, hd, theta, scaling);
  const RopeTable& tab = *table;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    rope_row(x + r * ld, tab.cos.data() + t * half, tab.sin.data() + t * half, heads, half, sign);
  }
}
// A number of the text form: all of `v`, finite.
double parse_number(const std::string& key, const std::string& v) {
  double out = 0.0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  ZS_CHECK(ec == std::errc() && end == v.data() + v.size() && std::isfinite(out), kBad,
           "rope scaling: {}={} is not a number", key, v);
  return out;
}
}  // namespace

const char* rope_scaling_kind_name(RopeScalingKind k) {
  switch (k) {
    case RopeScalingKind::kNone:
      return "none";
    case RopeScalingKind::kLinear:
      return "linear";
    case RopeScalingKind::kLlama3:
      return "llama3";
  }
  return "?";
}

void RopeScaling::validate() const {
  if (kind == RopeScalingKind::kNone) return;
  ZS_CHECK(std::isfinite(factor) && factor >= 1.0, kBad,
           "rope scaling: {} factor {} must be finite and at least 1", rope_scaling_kind_name(kind),
           factor);
  if (kind != RopeScalingKind::kLlama3) return;
  ZS_CHECK(std::isfinite(low_freq_factor) && low_freq_factor > 0.0, kBad,
           "rope scaling: llama3 low_freq_factor {} must be finite and above 0", low_freq_factor);
  ZS_CHECK(std::isfinite(high_freq_factor) && high_freq_factor > low_freq_factor, kBad,
           "rope scaling: llama3 high_freq_factor {} must be finite and above low_freq_factor {}",
           high_freq_factor, low_freq_factor);
  ZS_CHECK(original_context > 0, kBad,
           "rope scaling: llama3 original_max_position_embeddings {} must be positive",
           original_context);
}

std::string rope_scaling_text(const RopeScaling& s) {
  switch (s.kind) {
    case RopeScalingKind::kNone:
      return "none";
    case RopeScalingKind::kLinear:
      return fmt::format("linear:factor={}", s.factor);
    case RopeScalingKind::kLlama3:
      return fmt::format("llama3:factor={},low={},high={},original={}", s.factor, s.low_freq_factor,
                         s.high_freq_factor, s.original_context);
  }
  return "?";
}

RopeScaling parse_rope_scaling(const std::string& text) {
  RopeScaling s;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (kind == "linear") {
    s.kind = RopeScalingKind::kLinear;
  } else if (kind == "llama3") {
    s.kind = RopeScalingKind::kLlama3;
  } else {
    ZS_CHECK(kind == "none" && colon == std::string::npos, kBad,
             "rope scaling: '{}' is not one of none, linear:factor=F, "
             "llama3:factor=F,low=L,high=H,original=N",
             text);
    return s;
  }
  const bool llama3 = s.kind == RopeScalingKind::kLlama3;
  const std::vector<std::string> keys =
      llama3 ? std::vector<std::string>{"factor", "low", "high", "original"}
             : std::vector<std::string>{"factor"};
  std::vector<bool> seen(keys.size(), false);
  std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      value = eq == std::string::npos ? "" : item.substr(eq + 1);
    size_t k = 0;
    while (k < keys.size() && keys[k] != key) ++k;
    ZS_CHECK(k < keys.size() && eq != std::string::npos, kBad,
             "rope scaling: '{}' in '{}' is not one of {}'s fields ({}=...)", item, text, kind,
             fmt::join(keys, "=..., "));
    ZS_CHECK(!seen[k], kBad, "rope scaling: {} is given twice in '{}'", key, text);
    seen[k] = true;
    const double v = parse_number(key, value);
    if (key == "factor") s.factor = v;
    if (key == "low") s.low_freq_factor = v;
    if (key == "high") s.high_freq_factor = v;
    if (key == "original") {
      ZS_CHECK(v == std::floor(v) && v >= 1 && v <= (1 << 30), kBad,
               "rope scaling: original={} is not a positive whole number of positions", value);
      s.original_context = static_cast<int>(v);
    }
  }
  for (size_t k = 0; k < keys.size(); ++k)
    ZS_CHECK(seen[k], kBad, "rope scaling: '{}' lacks {}= ({} needs {}=...)", text, keys[k], kind,
             fmt::join(keys, "=..., "));
  s.validate();
  return s;
}

std::vector<float> rope_inv_freq(int hd, float theta, const RopeScaling& s) {
  std::vector<float> inv_freq(hd / 2);
  for (int i = 0; i < hd / 2; ++i) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim)): the exponent and the quotient in fp32,
    // the power correctly rounded (double, then fp32).
    const float e = static_cast<float>(2 * i) / static_cast<float>(hd);
    const float inv = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), e));
    switch (s.kind) {
      case RopeScalingKind::kNone:
        inv_freq[i] = inv;
        break;
      case RopeScalingKind::kLinear:  // inv_freq /= factor
        inv_freq[i] = inv / static_cast<float>(s.factor);
        break;
      case RopeScalingKind::kLlama3:
        inv_freq[i] = llama3_inv_freq(inv, s);
        break;
    }
  }
  return inv_freq;
}

void rope_forward(float* x, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                  const RopeScaling& scaling) {
  rope_apply(x, rows, T, heads, hd, ld, theta, scaling, 1.0f);
}

void rope_backward(float* dx, int64_t rows, int T, int heads, int hd, int64_t ld, float theta,
                   const RopeScaling& scaling) {
  rope_apply(dx, rows, T, heads, hd, ld, theta, scaling, -1.0f);
}

}  // namespace zs::nn
