#include "nn/gpt_specs.h"

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

std::vector<ParamSpec> gpt_embed_specs(const GptConfig& c) {
  const int64_t V = c.arch.vocab, T = c.arch.context, C = c.arch.width;
  return base(c, {spec("wte", {V, C}, Init::normal(0.0f, kInitStd), true),
                  spec("wpe", {T, C}, Init::normal(0.0f, kInitStd), true)});
}

std::vector<ParamSpec> gpt_block_specs(const GptConfig& c) {
  const int64_t C = c.arch.width, F = static_cast<int64_t>(c.arch.ffn_mult) * c.arch.width;
  const Init w = Init::normal(0.0f, kInitStd);
  const Init wres = Init::normal(0.0f, kInitStd / std::sqrt(2.0f * c.arch.layers));
  std::vector<ParamSpec> specs = {spec("ln1.weight", {C}, Init::ones(), false),
                                  spec("ln1.bias", {C}, Init::zeros(), false),
                                  spec("qkv.weight", {3 * C, C}, w, true),
                                  spec("qkv.bias", {3 * C}, Init::zeros(), false),
                                  spec("proj.weight", {C, C}, wres, true),
                                  spec("proj.bias", {C}, Init::zeros(), false),
                                  spec("ln2.weight", {C}, Init::ones(), false),
                                  spec("ln2.bias", {C}, Init::zeros(), false),
                                  spec("fc.weight", {F, C}, w, true),
                                  spec("fc.bias", {F}, Init::zeros(), false),
                                  spec("fc_proj.weight", {C, F}, wres, true),
                                  spec("fc_proj.bias", {C}, Init::zeros(), false)};
  specs = base(c, std::move(specs));
  // [Note: int8 base compute]
  for (int i : {kQkvW, kProjW, kFcW, kFcProjW})
    specs[static_cast<size_t>(i)].accepts_int8 = c.adapters.int8.accept;
  // [Note: LoRA] PEFT's initialisation: A kaiming_uniform(a = sqrt(5)), whose bound
  // sqrt(6 / ((1 + 5) fan_in)) is 1/sqrt(in); B zeros, so the adapted model starts as its base.
  const int64_t r = c.adapters.lora.rank;
  for (int t = 0; t < kNumGptLoraTargets; ++t) {
    const auto target = static_cast<GptLoraTarget>(t);
    if (!c.adapters.lora.targets_linear(target)) continue;
    int64_t in = 0, out = 0;
    gpt_lora_linear_shape(target, C, F, &in, &out);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    const std::string name = kGptLoraTargetNames[t];
    specs.push_back(spec(name + ".lora_A", {r, in}, Init::uniform(-bound, bound), true));
    specs.push_back(spec(name + ".lora_B", {out, r}, Init::zeros(), true));
  }
  return specs;
}

int gpt_lora_param_index(const GptConfig& c, GptLoraTarget t) {
  if (!c.adapters.lora.targets_linear(t)) return -1;
  int index = kNumBlockParams;
  for (int u = 0; u < static_cast<int>(t); ++u)
    if (c.adapters.lora.targets_linear(static_cast<GptLoraTarget>(u))) index += 2;
  return index;
}

std::vector<ParamSpec> gpt_head_specs(const GptConfig& c) {
  const int64_t C = c.arch.width, V = c.arch.vocab;
  return base(c, {spec("ln_f.weight", {C}, Init::ones(), false),
                  spec("ln_f.bias", {C}, Init::zeros(), false),
                  spec("lm_head.weight", {V, C}, Init::normal(0.0f, kInitStd), true)});
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
