#include "nn/gpt_config.h"

#include <cmath>

#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

namespace {

constexpr int kMaxLoraRank = 4096;

// "qkv, proj, fc, fc_proj"
std::string allowed_targets() {
  std::string s;
  for (const char* n : kGptLoraTargetNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

int lora_target_index(const std::string& name) {
  for (int t = 0; t < kNumGptLoraTargets; ++t)
    if (name == kGptLoraTargetNames[t]) return t;
  return -1;
}

void validate_lora(const GptLoraConfig& l) {
  ZS_CHECK(l.rank >= 0 && l.rank <= kMaxLoraRank, ErrorCode::kInvalidArgument,
           "gpt config: lora rank {} is outside 0..{}", l.rank, kMaxLoraRank);
  ZS_CHECK(std::isfinite(l.alpha) && l.alpha > 0.0f, ErrorCode::kInvalidArgument,
           "gpt config: lora alpha {} must be finite and positive", l.alpha);
  uint32_t seen = 0;
  for (const std::string& name : l.targets) {
    const int t = lora_target_index(name);
    ZS_CHECK(t >= 0, ErrorCode::kInvalidArgument, "gpt config: lora target \"{}\" is not one of {}",
             name, allowed_targets());
    ZS_CHECK(!((seen >> t) & 1u), ErrorCode::kInvalidArgument,
             "gpt config: lora target \"{}\" is given twice", name);
    seen |= 1u << t;
  }
  ZS_CHECK(l.rank == 0 || seen != 0, ErrorCode::kInvalidArgument,
           "gpt config: lora rank {} with no targets (choose from {})", l.rank, allowed_targets());
}

}  // namespace

uint32_t GptLoraConfig::target_mask() const {
  if (rank <= 0) return 0;
  uint32_t mask = 0;
  for (const std::string& name : targets) {
    const int t = lora_target_index(name);
    if (t >= 0) mask |= 1u << t;
  }
  return mask;
}

void gpt_lora_linear_shape(GptLoraTarget t, int64_t C, int64_t F, int64_t* in, int64_t* out) {
  switch (t) {
    case GptLoraTarget::kQkv:
      *in = C;
      *out = 3 * C;
      return;
    case GptLoraTarget::kProj:
      *in = C;
      *out = C;
      return;
    case GptLoraTarget::kFc:
      *in = C;
      *out = F;
      return;
    case GptLoraTarget::kFcProj:
      *in = F;
      *out = C;
      return;
  }
  ZS_ASSERT(false);
}

void check_gpt_lora_device(int64_t lora_rank, DeviceKind device) {
  ZS_CHECK(lora_rank == 0 || device == DeviceKind::kCpu, ErrorCode::kUnsupported,
           "cuda gpt: LoRA adapters are implemented on the CPU backend only (lora rank {})",
           lora_rank);
}

void GptConfig::validate() const {
  auto pos = [](int v, const char* name) {
    ZS_CHECK(v > 0, ErrorCode::kInvalidArgument, "gpt config: {} must be positive, got {}", name,
             v);
  };
  pos(layers, "layers");
  pos(heads, "heads");
  pos(width, "width");
  pos(context, "context");
  pos(vocab, "vocab");
  pos(batch, "batch");
  pos(ffn_mult, "ffn_mult");
  ZS_CHECK(width % heads == 0, ErrorCode::kInvalidArgument,
           "gpt config: width {} must divide by heads {}", width, heads);
  ZS_CHECK(std::isfinite(int8.outlier_threshold) && int8.outlier_threshold >= 0.0f,
           ErrorCode::kInvalidArgument,
           "gpt config: int8.outlier_threshold {} must be a finite number >= 0 (0 = off)",
           int8.outlier_threshold);
  // The layer norm's row buffers bound the width (the CPU's and the CUDA kernels' kMaxRow alike);
  // the vocabulary is unbounded (GPT-2's 50257).
  ZS_CHECK(width <= kMaxRow, ErrorCode::kInvalidArgument, "gpt config: width {} must be at most {}",
           width, kMaxRow);
  ZS_CHECK(
      compute_dtype == DType::kF32 || compute_dtype == DType::kBF16 || compute_dtype == DType::kF16,
      ErrorCode::kInvalidArgument, "gpt config: compute dtype must be fp32, bf16 or fp16, got {}",
      dtype_name(compute_dtype));
  ZS_CHECK(threads >= 0 && threads <= 1024, ErrorCode::kInvalidArgument,
           "gpt config: threads {} is outside 0..1024", threads);
  // Past these a model is a typo, not a model: refused before anything is allocated.
  ZS_CHECK(layers <= 100000 && ffn_mult <= 64, ErrorCode::kInvalidArgument,
           "gpt config: layers {} (at most 100000) or ffn_mult {} (at most 64) too large", layers,
           ffn_mult);
  const long double tokens = static_cast<long double>(batch) * context;
  ZS_CHECK(tokens <= (1 << 24), ErrorCode::kInvalidArgument,
           "gpt config: batch {} x context {} = {:.0f} tokens per micro-batch, more than the {} "
           "allowed",
           batch, context, static_cast<double>(tokens), 1 << 24);
  validate_lora(lora);
}

int64_t GptConfig::num_params() const {
  const int64_t C = width, F = static_cast<int64_t>(ffn_mult) * width, V = vocab, T = context;
  const int64_t embed = V * C + T * C;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
  const int64_t head = 2 * C + V * C;
  return embed + layers * (block + num_lora_params_per_block()) + head;
}

int64_t GptConfig::num_lora_params_per_block() const {
  const int64_t C = width, F = static_cast<int64_t>(ffn_mult) * width;
  int64_t n = 0;
  for (int t = 0; t < kNumGptLoraTargets; ++t) {
    if (!lora.targets_linear(static_cast<GptLoraTarget>(t))) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(static_cast<GptLoraTarget>(t), C, F, &in, &out);
    n += static_cast<int64_t>(lora.rank) * (in + out);
  }
  return n;
}

int64_t GptConfig::num_trainable_params() const {
  if (lora.enabled() && lora.freeze_base) return layers * num_lora_params_per_block();
  return num_params();
}

}  // namespace zs::nn
