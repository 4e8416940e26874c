#include "model_description.h"

#include <fmt/format.h>

namespace zs::train {
namespace {

// A float as its shortest decimal (1e-05, not 9.999999747378752e-06).
double shortest(float v) { return std::stod(fmt::format("{}", v)); }

// The component fields of architecture_json(), absent from checkpoints before issue 27.
constexpr const char* kComponents[] = {"norm", "norm_eps", "positions", "rope_theta", "mlp",
                                       "ffn",  "kv_heads", "qkv_bias",  "proj_bias",  "mlp_bias"};

}  // namespace

nlohmann::json architecture_json(const nn::GptArchitecture& a) {
  return {{"layers", a.layers},
          {"heads", a.heads},
          {"width", a.width},
          {"context", a.context},
          {"vocab", a.vocab},
          {"ffn_mult", a.ffn_mult},
          {"norm", nn::norm_kind_name(a.norm)},
          {"norm_eps", shortest(a.norm_eps)},
          {"positions", nn::position_kind_name(a.positions)},
          {"rope_theta", shortest(a.rope_theta)},
          {"mlp", nn::mlp_kind_name(a.mlp)},
          {"ffn", a.ffn_width()},
          {"kv_heads", a.kv_heads_or_heads()},
          {"qkv_bias", a.qkv_bias},
          {"proj_bias", a.proj_bias},
          {"mlp_bias", a.mlp_bias}};
}

std::string model_description(const TrainOptions& o) {
  const nn::GptConfig& m = o.model;
  nlohmann::json j = architecture_json(m.arch);
  j["model"] = "gpt";
  if (m.arch.tied_embeddings) j["tied_embeddings"] = true;  // absent untied: as before issue 27's
  if (m.adapters.lora.enabled()) {  // absent without adapters: full-model checkpoints as before
    j["lora-rank"] = m.adapters.lora.rank;
    j["lora-alpha"] = shortest(m.adapters.lora.alpha);  // 16, not 16.000000xxx
    j["lora-targets"] = nn::gpt_lora_target_names(m.adapters.lora.targets);
    j["base-dtype"] =
        std::string(dtype_name(o.engine.frozen.storage_or(o.engine.precision.param_dtype)));
  }
  return j.dump();
}

std::string description_to_expect(const std::string& saved, const std::string& current) {
  const nlohmann::json s = nlohmann::json::parse(saved, nullptr, false);
  nlohmann::json want = nlohmann::json::parse(current);
  if (!s.is_object() || s.contains("norm") || !s.contains("layers")) return current;
  // GPT-2's components at this model's dimensions: what an old checkpoint was trained with.
  nn::GptArchitecture gpt2;
  gpt2.width = want.at("width").get<int>();
  gpt2.heads = want.at("heads").get<int>();
  gpt2.ffn_mult = want.at("ffn_mult").get<int>();
  const nlohmann::json old = architecture_json(gpt2);
  for (const char* key : kComponents)
    if (want.at(key) == old.at(key)) want.erase(key);
  return want.dump();
}

}  // namespace zs::train
