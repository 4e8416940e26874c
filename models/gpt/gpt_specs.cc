#include "models/gpt/gpt_specs.h"

#include <cmath>

namespace zs::nn {

namespace {

constexpr float kInitStd = 0.02f;

ParamSpec spec(std::string name, std::vector<int64_t> shape, Init init, bool decay) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.init = init;
  p.weight_decay = decay;
  return p;
}

// The base parameters freeze when LoRA adapters train alone ([Note: LoRA]).
std::vector<ParamSpec> base(const GptConfig& c, std::vector<ParamSpec> specs) {
  const bool frozen = c.adapters.lora.enabled() && c.adapters.lora.freeze_base;
  for (ParamSpec& p : specs) p.trainable = !frozen;
  return specs;
}

}  // namespace

GptBlockLayout GptBlockLayout::of(const GptArchitecture& a) {
  GptBlockLayout l;
  int n = 0;
  auto take = [&n](bool present) { return present ? n++ : -1; };
  const bool nb = a.has_norm_bias();
  l.ln1_w = take(true);
  l.ln1_b = take(nb);
  l.qkv_w = take(true);
  l.qkv_b = take(a.qkv_bias);
  l.q_norm_w = take(a.qk_norm);
  l.k_norm_w = take(a.qk_norm);
  l.proj_w = take(true);
  l.proj_b = take(a.proj_bias);
  l.ln2_w = take(true);
  l.ln2_b = take(nb);
  l.fc_w = take(true);
  l.fc_b = take(a.mlp_bias);
  l.fc_proj_w = take(true);
  l.fc_proj_b = take(a.mlp_bias);
  l.count = n;
  return l;
}

int GptBlockLayout::weight(GptLoraTarget t) const {
  const int w[kNumGptLinears] = {qkv_w, proj_w, fc_w, fc_proj_w};
  return w[static_cast<int>(gpt_lora_base_linear(t))];
}

int GptBlockLayout::bias(GptLoraTarget t) const {
  const int b[kNumGptLinears] = {qkv_b, proj_b, fc_b, fc_proj_b};
  return b[static_cast<int>(gpt_lora_base_linear(t))];
}

GptHeadLayout GptHeadLayout::of(const GptArchitecture& a) {
  GptHeadLayout l;
  l.ln_b = a.has_norm_bias() ? 1 : -1;
  l.lm_head = a.has_norm_bias() ? 2 : 1;
  return l;
}

std::vector<ParamSpec> gpt_embed_specs(const GptConfig& c) {
  const int64_t V = c.arch.vocab, T = c.arch.context, C = c.arch.width;
  std::vector<ParamSpec> specs = {spec("wte", {V, C}, Init::normal(0.0f, kInitStd), true)};
  if (c.arch.positions == PositionKind::kLearned)
    specs.push_back(spec("wpe", {T, C}, Init::normal(0.0f, kInitStd), true));
  return base(c, std::move(specs));
}

std::vector<ParamSpec> gpt_block_specs(const GptConfig& c) {
  const GptArchitecture& a = c.arch;
  const int64_t C = a.width, F = a.ffn_width(), Q = a.qkv_rows(), G = a.fc_rows();
  const int64_t D = a.attn_width(), hd = a.head_dim();
  const Init w = Init::normal(0.0f, kInitStd);
  const Init wres = Init::normal(0.0f, kInitStd / std::sqrt(2.0f * a.layers));
  const bool nb = a.has_norm_bias();
  std::vector<ParamSpec> specs;
  auto add = [&specs](bool present, ParamSpec p) {
    if (present) specs.push_back(std::move(p));
  };
  add(true, spec("ln1.weight", {C}, Init::ones(), false));
  add(nb, spec("ln1.bias", {C}, Init::zeros(), false));
  add(true, spec("qkv.weight", {Q, C}, w, true));
  add(a.qkv_bias, spec("qkv.bias", {Q}, Init::zeros(), false));
  add(a.qk_norm, spec("q_norm.weight", {hd}, Init::ones(), false));
  add(a.qk_norm, spec("k_norm.weight", {hd}, Init::ones(), false));
  add(true, spec("proj.weight", {C, D}, wres, true));
  add(a.proj_bias, spec("proj.bias", {C}, Init::zeros(), false));
  add(true, spec("ln2.weight", {C}, Init::ones(), false));
  add(nb, spec("ln2.bias", {C}, Init::zeros(), false));
  add(true, spec("fc.weight", {G, C}, w, true));
  add(a.mlp_bias, spec("fc.bias", {G}, Init::zeros(), false));
  add(true, spec("fc_proj.weight", {C, F}, wres, true));
  add(a.mlp_bias, spec("fc_proj.bias", {C}, Init::zeros(), false));
  specs = base(c, std::move(specs));
  // [Note: int8 base compute]
  const GptBlockLayout layout = GptBlockLayout::of(a);
  for (int t = 0; t < kNumGptLinears; ++t) {
    const int i = layout.weight(static_cast<GptLoraTarget>(t));
    specs[static_cast<size_t>(i)].accepts_int8 = c.adapters.int8.accept;
  }
  // [Note: LoRA] PEFT's initialisation: A kaiming_uniform(a = sqrt(5)), whose bound
  // sqrt(6 / ((1 + 5) fan_in)) is 1/sqrt(in); B zeros, so the adapted model starts as its base.
  const int64_t r = c.adapters.lora.rank;
  for (int t = 0; t < kNumGptLoraTargets; ++t) {
    const auto target = static_cast<GptLoraTarget>(t);
    if (!c.adapters.lora.targets_linear(target)) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(target, a, &in, &out);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    const std::string name = kGptLoraTargetNames[t];
    specs.push_back(spec(name + ".lora_A", {r, in}, Init::uniform(-bound, bound), true));
    specs.push_back(spec(name + ".lora_B", {out, r}, Init::zeros(), true));
  }
  return specs;
}

int gpt_lora_param_index(const GptConfig& c, GptLoraTarget t) {
  if (!c.adapters.lora.targets_linear(t)) return -1;
  int index = GptBlockLayout::of(c.arch).count;
  for (int u = 0; u < static_cast<int>(t); ++u)
    if (c.adapters.lora.targets_linear(static_cast<GptLoraTarget>(u))) index += 2;
  return index;
}

std::vector<ParamSpec> gpt_head_specs(const GptConfig& c) {
  const int64_t C = c.arch.width, V = c.arch.vocab;
  std::vector<ParamSpec> specs = {spec("ln_f.weight", {C}, Init::ones(), false)};
  if (c.arch.has_norm_bias()) specs.push_back(spec("ln_f.bias", {C}, Init::zeros(), false));
  specs.push_back(spec("lm_head.weight", {V, C}, Init::normal(0.0f, kInitStd), true));
  specs = base(c, std::move(specs));
  if (c.arch.tied_embeddings) specs.back().tied_to = {0, "wte"};  // [Note: tied parameters]
  return specs;
}

std::string gpt_unit_name(const GptConfig& c, size_t unit) {
  if (unit == 0) return "embed";
  if (unit <= static_cast<size_t>(c.arch.layers)) return "block." + std::to_string(unit - 1);
  return "head";
}

std::vector<ParamSpec> gpt_unit_specs(const GptConfig& c, size_t unit) {
  if (unit == 0) return gpt_embed_specs(c);
  if (unit <= static_cast<size_t>(c.arch.layers)) return gpt_block_specs(c);
  return gpt_head_specs(c);
}

}  // namespace zs::nn
