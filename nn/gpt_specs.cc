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

}  // namespace

std::vector<ParamSpec> gpt_embed_specs(const GptConfig& c) {
  const int64_t V = c.vocab, T = c.context, C = c.width;
  return {spec("wte", {V, C}, Init::normal(0.0f, kInitStd), true),
          spec("wpe", {T, C}, Init::normal(0.0f, kInitStd), true)};
}

std::vector<ParamSpec> gpt_block_specs(const GptConfig& c) {
  const int64_t C = c.width, F = static_cast<int64_t>(c.ffn_mult) * c.width;
  const Init w = Init::normal(0.0f, kInitStd);
  const Init wres = Init::normal(0.0f, kInitStd / std::sqrt(2.0f * c.layers));
  return {spec("ln1.weight", {C}, Init::ones(), false),
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
}

std::vector<ParamSpec> gpt_head_specs(const GptConfig& c) {
  const int64_t C = c.width, V = c.vocab;
  return {spec("ln_f.weight", {C}, Init::ones(), false),
          spec("ln_f.bias", {C}, Init::zeros(), false),
          spec("lm_head.weight", {V, C}, Init::normal(0.0f, kInitStd), true)};
}

std::string gpt_unit_name(const GptConfig& c, size_t unit) {
  if (unit == 0) return "embed";
  if (unit <= static_cast<size_t>(c.layers)) return "block." + std::to_string(unit - 1);
  return "head";
}

std::vector<ParamSpec> gpt_unit_specs(const GptConfig& c, size_t unit) {
  if (unit == 0) return gpt_embed_specs(c);
  if (unit <= static_cast<size_t>(c.layers)) return gpt_block_specs(c);
  return gpt_head_specs(c);
}

}  // namespace zs::nn
