#include "model_description.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zs::train {
namespace {

// The description's keys in --help's order, each with its flag; the derived ones (ffn_mult,
// and ffn unless it was the change) come after.
struct DescribedFlag {
  const char* key;
  const char* flag;
};
constexpr DescribedFlag kFlagOrder[] = {{"layers", "--layers"},
                                        {"heads", "--heads"},
                                        {"width", "--width"},
                                        {"context", "--context"},
                                        {"vocab", "--vocab"},
                                        {"kv_heads", "--kv-heads"},
                                        {"head_dim", "--head-dim"},
                                        {"qk_norm", "--qk-norm"},
                                        {"ffn", "--ffn"},
                                        {"norm", "--norm"},
                                        {"norm_eps", "--norm-eps"},
                                        {"positions", "--positions"},
                                        {"rope_theta", "--rope-theta"},
                                        {"rope_scaling", "--rope-scaling"},
                                        {"mlp", "--mlp"},
                                        {"qkv_bias", "--qkv-bias"},
                                        {"proj_bias", "--proj-bias"},
                                        {"mlp_bias", "--mlp-bias"},
                                        {"tied_embeddings", "--tie-embeddings"},
                                        {"lora-rank", "--lora-rank"},
                                        {"lora-alpha", "--lora-alpha"},
                                        {"lora-targets", "--lora-targets"},
                                        {"base-dtype", "--base-dtype"}};

// A description value as a flag takes it: on/off for switches, strings unquoted, lists with commas.
std::string value_text(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out;
    for (const nlohmann::json& e : v) out += (out.empty() ? "" : ",") + value_text(e);
    return out;
  }
  return v.dump();
}

// The value of `key` in a description; "off" for an absent tied_embeddings or qk_norm, "none" for
// an absent rope_scaling and "width / heads" for an absent head_dim (each stored only when set).
std::string flag_value(const nlohmann::json& d, const char* key) {
  if (!d.contains(key)) {
    const std::string k = key;
    if (k == "tied_embeddings" || k == "qk_norm") return "off";
    if (k == "head_dim") return "width / heads";
    return k == "rope_scaling" ? "none" : "(absent)";
  }
  return value_text(d[key]);
}

// The family a description's components make (nn::GptArchitecture::family()); "" for a
// description without components.
std::string family_of(const nlohmann::json& d) {
  if (!d.contains("norm") || !d.contains("heads")) return "";
  const bool biases =
      d.value("qkv_bias", true) && d.value("proj_bias", true) && d.value("mlp_bias", true);
  const bool none =
      !d.value("qkv_bias", true) && !d.value("proj_bias", true) && !d.value("mlp_bias", true);
  const std::string norm = d["norm"], pos = d.value("positions", ""), mlp = d.value("mlp", "");
  if (norm == "layernorm" && pos == "learned" && mlp == "gelu" && biases &&
      d.value("kv_heads", 0) == d["heads"].get<int>())
    return "gpt2";
  if (norm == "rmsnorm" && pos == "rotary" && mlp == "swiglu" && none)
    return d.value("qk_norm", false) ? "qwen3" : "llama";
  return "custom";
}

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

nn::GptArchitecture architecture_from_description(const std::string& text,
                                                  const std::string& where) {
  const nlohmann::json d = nlohmann::json::parse(text, nullptr, false);
  nn::GptArchitecture a;
  try {
    a.layers = d.at("layers").get<int>();
    a.heads = d.at("heads").get<int>();
    a.width = d.at("width").get<int>();
    a.context = d.at("context").get<int>();
    a.vocab = d.at("vocab").get<int>();
    a.ffn_mult = d.value("ffn_mult", a.ffn_mult);
    a.tied_embeddings = d.value("tied_embeddings", false);
    if (!d.contains("norm")) return a;  // before the components were stored: GPT-2's
    const std::string norm = d.at("norm"), pos = d.at("positions"), mlp = d.at("mlp");
    ZS_CHECK(norm == "layernorm" || norm == "rmsnorm", ErrorCode::kCorruptData, "norm '{}'", norm);
    ZS_CHECK(pos == "learned" || pos == "rotary", ErrorCode::kCorruptData, "positions '{}'", pos);
    ZS_CHECK(mlp == "gelu" || mlp == "swiglu", ErrorCode::kCorruptData, "mlp '{}'", mlp);
    a.norm = norm == "rmsnorm" ? nn::NormKind::kRMSNorm : nn::NormKind::kLayerNorm;
    a.positions = pos == "rotary" ? nn::PositionKind::kRotary : nn::PositionKind::kLearned;
    a.mlp = mlp == "swiglu" ? nn::MlpKind::kSwiGLU : nn::MlpKind::kGelu;
    a.norm_eps = d.at("norm_eps").get<float>();
    a.rope_theta = d.at("rope_theta").get<float>();
    if (d.contains("rope_scaling"))
      a.rope_scaling = nn::parse_rope_scaling(d.at("rope_scaling").get<std::string>());
    a.ffn = d.at("ffn").get<int>();
    a.kv_heads = d.at("kv_heads").get<int>();
    a.qkv_bias = d.at("qkv_bias").get<bool>();
    a.proj_bias = d.at("proj_bias").get<bool>();
    a.mlp_bias = d.at("mlp_bias").get<bool>();
    a.head_dim_override = d.value("head_dim", 0);  // absent: width / heads
    a.qk_norm = d.value("qk_norm", false);
    a.validate();
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: the model description is not zs_train's ({})", where,
         e.what());
  } catch (const Error& e) {
    fail(ErrorCode::kCorruptData, "{}: the model description is not zs_train's ({})", where,
         e.what());
  }
  return a;
}

std::string model_description(const TrainOptions& o) {
  const nn::GptConfig& m = o.model;
  nlohmann::json j = architecture_json(m.arch);
  j["model"] = "gpt";
  if (m.arch.tied_embeddings) j["tied_embeddings"] = true;  // absent untied: as before issue 27's
  // Absent unless set: the descriptions of checkpoints before them still match.
  if (m.arch.head_dim_override > 0) j["head_dim"] = m.arch.head_dim_override;
  if (m.arch.qk_norm) j["qk_norm"] = true;
  // Absent without scaling: the descriptions of checkpoints before it still match.
  if (m.arch.rope_scaling.enabled()) j["rope_scaling"] = nn::rope_scaling_text(m.arch.rope_scaling);
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
  if (s.is_object() && s.contains("context") && s.value("positions", "") == "rotary" &&
      want.value("positions", "") == "rotary")
    want["context"] = s["context"];
  if (!s.is_object() || s.contains("norm") || !s.contains("layers")) return want.dump();
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

std::string describe_model_change(const std::string& saved_text, const std::string& expected) {
  const nlohmann::json saved = nlohmann::json::parse(saved_text, nullptr, false);
  const nlohmann::json want = nlohmann::json::parse(expected, nullptr, false);
  if (!saved.is_object() || !want.is_object() || saved == want) return "";
  // Adapters on one side only: a full-model checkpoint and a fine-tune are different runs.
  if (saved.contains("lora-rank") != want.contains("lora-rank")) {
    if (want.contains("lora-rank"))
      return fmt::format(
          "--lora-rank {} in this run, but the checkpoint is a full-model one (no LoRA "
          "adapters): resume it without the LoRA flags, or fine-tune from its weights "
          "(--export-safetensors, then --init-safetensors)",
          flag_value(want, "lora-rank"));
    return fmt::format(
        "the checkpoint holds LoRA adapters (--lora-rank {} --base-dtype {}) on a "
        "frozen base; this run has none: give the checkpoint's LoRA flags and its "
        "base",
        flag_value(saved, "lora-rank"), flag_value(saved, "base-dtype"));
  }
  const std::string fs = family_of(saved), fw = family_of(want);
  if (!fs.empty() && !fw.empty() && fs != fw && fs != "custom" && fw != "custom")
    return fmt::format(
        "the checkpoint is a {} model (--family {}: {}, {}, {}), this run a {} one "
        "({}, {}, {}): give --family {} and the checkpoint's other model flags",
        fs, fs, flag_value(saved, "norm"), flag_value(saved, "positions"), flag_value(saved, "mlp"),
        fw, flag_value(want, "norm"), flag_value(want, "positions"), flag_value(want, "mlp"), fs);
  std::string first, others;
  for (const DescribedFlag& f : kFlagOrder) {
    if (saved.value(f.key, nlohmann::json()) == want.value(f.key, nlohmann::json())) continue;
    // The MLP width follows --width unless it was given: named as a consequence then.
    const bool follows = std::string(f.key) == "ffn" && !first.empty();
    const std::string text = fmt::format("{} {} in this run, {} in the checkpoint", f.flag,
                                         flag_value(want, f.key), flag_value(saved, f.key));
    if (first.empty() && !follows) {
      first = text;
    } else {
      others += fmt::format("{}{} {} vs {}", others.empty() ? "" : ", ", f.key,
                            flag_value(want, f.key), flag_value(saved, f.key));
    }
  }
  if (first.empty()) return "";  // only keys outside the flags differ: the generic check names them
  return others.empty()
             ? first
             : fmt::format("{}; also differing (this run vs the checkpoint): {}", first, others);
}

}  // namespace zs::train
