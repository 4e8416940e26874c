#include "models/gpt/gpt_adapters.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace zs::nn {

namespace {

constexpr int kMaxLoraRank = 4096;

}  // namespace

const char* gpt_lora_target_name(GptLoraTarget t) {
  const int i = static_cast<int>(t);
  ZS_ASSERT(i >= 0 && i < kNumGptLoraTargets);
  return kGptLoraTargetNames[i];
}

std::optional<GptLoraTarget> gpt_lora_target_from_name(std::string_view name) {
  for (int t = 0; t < kNumGptLoraTargets; ++t)
    if (name == kGptLoraTargetNames[t]) return static_cast<GptLoraTarget>(t);
  return std::nullopt;
}

std::string gpt_lora_allowed_targets() {
  std::string s;
  for (const char* n : kGptLoraTargetNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s + " or the aliases o_proj, down_proj, c_attn, c_fc, c_proj";
}

namespace {

// Hugging Face's module names for our targets (GPT-2's c_proj is two of our linears).
std::vector<GptLoraTarget> alias_targets(std::string_view name) {
  if (name == "o_proj") return {GptLoraTarget::kProj};
  if (name == "down_proj") return {GptLoraTarget::kFcProj};
  if (name == "c_attn") return {GptLoraTarget::kQkv};
  if (name == "c_fc") return {GptLoraTarget::kFc};
  if (name == "c_proj") return {GptLoraTarget::kProj, GptLoraTarget::kFcProj};
  return {};
}

}  // namespace

std::vector<GptLoraTarget> gpt_lora_targets_from_names(std::span<const std::string> names) {
  std::vector<GptLoraTarget> targets;
  uint32_t seen = 0;
  for (const std::string& name : names) {
    std::vector<GptLoraTarget> named = alias_targets(name);
    if (const std::optional<GptLoraTarget> t = gpt_lora_target_from_name(name)) named = {*t};
    ZS_CHECK(!named.empty(), ErrorCode::kInvalidArgument,
             "gpt config: lora target \"{}\" is not one of {}", name, gpt_lora_allowed_targets());
    for (GptLoraTarget t : named) {
      const uint32_t bit = 1u << static_cast<int>(t);
      ZS_CHECK(!(seen & bit), ErrorCode::kInvalidArgument,
               "gpt config: lora target \"{}\" is given twice", name);
      seen |= bit;
      targets.push_back(t);
    }
  }
  return targets;
}

GptLoraTarget gpt_lora_base_linear(GptLoraTarget t) {
  switch (t) {
    case GptLoraTarget::kQ:
    case GptLoraTarget::kK:
    case GptLoraTarget::kV:
      return GptLoraTarget::kQkv;
    case GptLoraTarget::kGate:
    case GptLoraTarget::kUp:
      return GptLoraTarget::kFc;
    default:
      return t;
  }
}

void check_gpt_lora_targets(const GptLoraConfig& lora, const GptArchitecture& arch) {
  if (!lora.enabled()) return;
  const bool swiglu = arch.mlp == MlpKind::kSwiGLU;
  for (GptLoraTarget t : {GptLoraTarget::kGate, GptLoraTarget::kUp})
    ZS_CHECK(swiglu || !lora.targets_linear(t), ErrorCode::kInvalidArgument,
             "gpt config: lora target {} needs the SwiGLU MLP (mlp swiglu; this model's is {})",
             gpt_lora_target_name(t), mlp_kind_name(arch.mlp));
  for (int i = kNumGptLinears; i < kNumGptLoraTargets; ++i) {
    const auto part = static_cast<GptLoraTarget>(i);
    const GptLoraTarget whole = gpt_lora_base_linear(part);
    ZS_CHECK(!(lora.targets_linear(part) && lora.targets_linear(whole)),
             ErrorCode::kInvalidArgument,
             "gpt config: lora targets {} and {} overlap ({} is part of the fused {})",
             gpt_lora_target_name(whole), gpt_lora_target_name(part), gpt_lora_target_name(part),
             gpt_lora_target_name(whole));
  }
}

std::vector<GptLoraTarget> parse_gpt_lora_targets(std::string_view list) {
  std::vector<std::string> names;
  for (size_t b = 0; b <= list.size();) {
    const size_t e = std::min(list.find(',', b), list.size());
    names.emplace_back(list.substr(b, e - b));
    b = e + 1;
  }
  return gpt_lora_targets_from_names(names);
}

std::vector<std::string> gpt_lora_target_names(std::span<const GptLoraTarget> targets) {
  std::vector<std::string> names;
  for (GptLoraTarget t : targets) names.emplace_back(gpt_lora_target_name(t));
  return names;
}

std::string format_gpt_lora_targets(std::span<const GptLoraTarget> targets) {
  std::string s;
  for (GptLoraTarget t : targets)
    s += (s.empty() ? "" : ",") + std::string(gpt_lora_target_name(t));
  return s;
}

uint32_t GptLoraConfig::target_mask() const {
  if (rank <= 0) return 0;
  uint32_t mask = 0;
  for (GptLoraTarget t : targets) mask |= 1u << static_cast<int>(t);
  return mask;
}

void GptLoraConfig::validate() const {
  ZS_CHECK(rank >= 0 && rank <= kMaxLoraRank, ErrorCode::kInvalidArgument,
           "gpt config: lora rank {} is outside 0..{}", rank, kMaxLoraRank);
  ZS_CHECK(std::isfinite(alpha) && alpha > 0.0f, ErrorCode::kInvalidArgument,
           "gpt config: lora alpha {} must be finite and positive", alpha);
  // Typed targets are known names; a repeat is still possible (and refused by name).
  gpt_lora_targets_from_names(gpt_lora_target_names(targets));
  ZS_CHECK(rank == 0 || !targets.empty(), ErrorCode::kInvalidArgument,
           "gpt config: lora rank {} with no targets (choose from {})", rank,
           gpt_lora_allowed_targets());
}

void GptAdapters::validate() const {
  ZS_CHECK(std::isfinite(int8.outlier_threshold) && int8.outlier_threshold >= 0.0f,
           ErrorCode::kInvalidArgument,
           "gpt config: int8.outlier_threshold {} must be a finite number >= 0 (0 = off)",
           int8.outlier_threshold);
  lora.validate();
}

int64_t GptAdapters::num_lora_params_per_block(const GptArchitecture& arch) const {
  int64_t n = 0;
  for (int t = 0; t < kNumGptLoraTargets; ++t) {
    if (!lora.targets_linear(static_cast<GptLoraTarget>(t))) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(static_cast<GptLoraTarget>(t), arch, &in, &out);
    n += static_cast<int64_t>(lora.rank) * (in + out);
  }
  return n;
}

void gpt_lora_linear_shape(GptLoraTarget t, const GptArchitecture& arch, int64_t* in,
                           int64_t* out) {
  const int64_t C = arch.width, F = arch.ffn_width();
  const int64_t kv = static_cast<int64_t>(arch.kv_heads_or_heads()) * arch.head_dim();
  const int64_t D = arch.attn_width();
  *in = t == GptLoraTarget::kFcProj ? F : t == GptLoraTarget::kProj ? D : C;
  switch (t) {
    case GptLoraTarget::kQkv:
      *out = arch.qkv_rows();
      return;
    case GptLoraTarget::kFc:
      *out = arch.fc_rows();
      return;
    case GptLoraTarget::kProj:
    case GptLoraTarget::kFcProj:
      *out = C;
      return;
    case GptLoraTarget::kQ:
      *out = D;
      return;
    case GptLoraTarget::kK:
    case GptLoraTarget::kV:
      *out = kv;
      return;
    case GptLoraTarget::kGate:
    case GptLoraTarget::kUp:
      *out = F;
      return;
  }
  ZS_ASSERT(false);
}

int64_t gpt_lora_row_offset(GptLoraTarget t, const GptArchitecture& arch) {
  const int64_t D = arch.attn_width();
  const int64_t kv = static_cast<int64_t>(arch.kv_heads_or_heads()) * arch.head_dim();
  switch (t) {
    case GptLoraTarget::kK:
      return D;
    case GptLoraTarget::kV:
      return D + kv;
    case GptLoraTarget::kUp:
      return arch.ffn_width();
    default:
      return 0;
  }
}

void check_gpt_lora_device(int64_t lora_rank, DeviceKind device) {
  ZS_CHECK(lora_rank == 0 || device == DeviceKind::kCpu, ErrorCode::kUnsupported,
           "cuda gpt: LoRA adapters are implemented on the CPU backend only (lora rank {})",
           lora_rank);
}

}  // namespace zs::nn
