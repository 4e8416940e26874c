#include "interop/hf_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zs::nn {
namespace {

using nlohmann::json;
constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

constexpr HfFamily kFamilies[] = {HfFamily::kGpt2, HfFamily::kLlama, HfFamily::kMistral,
                                  HfFamily::kQwen2, HfFamily::kQwen3};

// Qwen3Config's head_dim when config.json has none.
constexpr int kQwen3DefaultHeadDim = 128;

// Gemma's families: refused naming what they compute that zeroshard's decoder does not.
void refuse_gemma(const std::string& type, const std::string& cls, const std::string& where) {
  const bool gemma1 = type == "gemma" || cls == "GemmaForCausalLM";
  const bool later = type == "gemma2" || type == "gemma3" || type == "gemma3_text" ||
                     cls == "Gemma2ForCausalLM" || cls == "Gemma3ForCausalLM" ||
                     cls == "Gemma3ForConditionalGeneration";
  if (!gemma1 && !later) return;
  fail(kBad,
       "{}: \"model_type\" is \"{}\" ({}): zeroshard's decoder lacks Gemma's components: the "
       "GeGLU MLP (hidden_activation gelu_pytorch_tanh on gate_proj), the embedding scaled by "
       "sqrt(hidden_size), and RMSNorm's (1 + weight) scale{}",
       where, type.empty() ? "?" : type, cls.empty() ? "no architectures" : cls,
       later ? "; and Gemma 2/3's attn_logit_softcapping / final_logit_softcapping, "
               "query_pre_attn_scalar, the extra pre/post-feedforward norms and the "
               "alternating sliding-window layers (sliding_window, layer_types)"
             : "");
}

// A positive integer field; `fallback` (another spelling) when `key` is absent.
int positive(const json& j, const std::string& key, const std::string& where,
             const char* fallback = nullptr) {
  std::string k = key;
  if (!j.contains(k) && fallback && j.contains(fallback)) k = fallback;
  ZS_CHECK(j.contains(k), kBad, "{}: \"{}\" is missing", where, key);
  const json& v = j.at(k);
  ZS_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (1 << 30), kBad,
           "{}: \"{}\" is {}, a positive integer expected", where, k, v.dump());
  return v.get<int>();
}

// An optional field of type T with a default (absent or null).
template <typename T>
T optional_field(const json& j, const char* key, T dflt, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(kBad, "{}: \"{}\" is {}, not of the expected type", where, key, j.at(key).dump());
  }
}

// A float as config.json should show it: its shortest decimal form (1e-05, not 9.99999974e-06).
double json_float(float v) { return std::stod(fmt::format("{}", v)); }

// The family of model_type, or of architectures[0] when model_type is absent (GPT-2 when both
// are); the architectures list, when present, must name that family's class.
HfFamily family_of(const json& j, const std::string& where) {
  const json archs = j.contains("architectures") ? j.at("architectures") : json();
  const bool has_archs = archs.is_array() && !archs.empty() && archs[0].is_string();
  std::string type = optional_field<std::string>(j, "model_type", "", where);
  refuse_gemma(type, has_archs ? archs[0].get<std::string>() : "", where);
  for (HfFamily f : kFamilies) {
    if (type.empty() && has_archs && archs[0] == hf_class_name(f)) type = hf_model_type(f);
  }
  if (type.empty()) type = "gpt2";
  for (HfFamily f : kFamilies) {
    if (type != hf_model_type(f)) continue;
    ZS_CHECK(!has_archs || (archs.size() == 1 && archs[0] == hf_class_name(f)), kBad,
             "{}: \"model_type\" is \"{}\" but \"architectures\" is {}; zeroshard maps {} as "
             "[\"{}\"] only",
             where, type, archs.dump(), type, hf_class_name(f));
    return f;
  }
  fail(kBad,
       "{}: \"model_type\" is \"{}\"; zeroshard's decoder maps gpt2 (GPT2LMHeadModel), llama "
       "(LlamaForCausalLM), mistral (MistralForCausalLM), qwen2 (Qwen2ForCausalLM) and qwen3 "
       "(Qwen3ForCausalLM)",
       where, type);
}

void parse_gpt2(const json& j, const std::string& where, HfConfig& c) {
  GptArchitecture& a = c.arch;
  a.layers = positive(j, "n_layer", where);
  a.heads = positive(j, "n_head", where);
  a.width = positive(j, "n_embd", where);
  a.context = c.max_positions = positive(j, "n_positions", where, "n_ctx");
  a.vocab = positive(j, "vocab_size", where);
  int inner = 4 * a.width;
  if (j.contains("n_inner") && !j.at("n_inner").is_null()) inner = positive(j, "n_inner", where);
  // A multiple of the width stays ffn_mult (the default 4 is today's GPT); others are explicit.
  if (inner % a.width == 0)
    a.ffn_mult = inner / a.width;
  else
    a.ffn = inner;
  const std::string act = optional_field<std::string>(j, "activation_function", "gelu_new", where);
  ZS_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", kBad,
           "{}: \"activation_function\" is \"{}\"; zeroshard's GPT computes GELU's tanh "
           "approximation (gelu_new or gelu_pytorch_tanh)",
           where, act);
  a.norm_eps = optional_field<float>(j, "layer_norm_epsilon", 1e-5f, where);
  ZS_CHECK(optional_field<bool>(j, "scale_attn_weights", true, where), kBad,
           "{}: \"scale_attn_weights\" is false; zeroshard's attention scales by 1/sqrt(head dim)",
           where);
  ZS_CHECK(!optional_field<bool>(j, "scale_attn_by_inverse_layer_idx", false, where), kBad,
           "{}: \"scale_attn_by_inverse_layer_idx\" is true; zeroshard's attention does not",
           where);
  c.tied = optional_field<bool>(j, "tie_word_embeddings", true, where);
  c.arch.tied_embeddings = c.tied;
}

// A number field of a rope-scaling object `obj` (named `name` in config.json), required.
double rope_number(const json& obj, const std::string& name, const char* key,
                   const std::string& where) {
  ZS_CHECK(obj.contains(key) && !obj.at(key).is_null(), kBad, "{}: \"{}.{}\" is missing ({} is {})",
           where, name, key, name, obj.dump());
  ZS_CHECK(obj.at(key).is_number(), kBad, "{}: \"{}.{}\" is {}, a number expected", where, name,
           key, obj.at(key).dump());
  return obj.at(key).get<double>();
}

// The rope scaling an object of config.json describes: 4.x's "rope_scaling" {rope_type (older:
// type), factor, ...} or 5.x's "rope_parameters" {rope_type, rope_theta, factor, ...}, `name` the
// field. rope_type default: none; linear: factor; llama3: factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings. Any other type, a missing, malformed or
// unknown key: refused naming the field and its value.
RopeScaling rope_scaling_in(const json& obj, const std::string& name, const std::string& where) {
  ZS_CHECK(obj.is_object(), kBad, "{}: \"{}\" is {}, an object expected", where, name, obj.dump());
  const bool parameters = name == "rope_parameters";
  const bool has_type = obj.contains("rope_type"), has_old = obj.contains("type");
  ZS_CHECK(has_type || has_old || parameters, kBad,
           "{}: \"{}\" is {}; its \"rope_type\" is missing", where, name, obj.dump());
  const char* type_key = has_type ? "rope_type" : "type";
  const std::string type = optional_field<std::string>(obj, type_key, "default", where);
  ZS_CHECK(!has_type || !has_old || obj.at("type") == obj.at("rope_type"), kBad,
           "{}: \"{}.type\" is {} but \"{}.rope_type\" is {}", where, name, obj.at("type").dump(),
           name, obj.at("rope_type").dump());
  RopeScaling s;
  std::vector<std::string> keys = {"rope_type", "type"};
  if (parameters) keys.push_back("rope_theta");  // read by rope_of
  if (type == "linear") {
    s.kind = RopeScalingKind::kLinear;
    s.factor = rope_number(obj, name, "factor", where);
    keys.push_back("factor");
  } else if (type == "llama3") {
    s.kind = RopeScalingKind::kLlama3;
    s.factor = rope_number(obj, name, "factor", where);
    s.low_freq_factor = rope_number(obj, name, "low_freq_factor", where);
    s.high_freq_factor = rope_number(obj, name, "high_freq_factor", where);
    const double original = rope_number(obj, name, "original_max_position_embeddings", where);
    ZS_CHECK(original == std::floor(original) && original >= 1 && original <= (1 << 30), kBad,
             "{}: \"{}.original_max_position_embeddings\" is {}, a positive integer expected",
             where, name, obj.at("original_max_position_embeddings").dump());
    s.original_context = static_cast<int>(original);
    keys.insert(keys.end(), {"factor", "low_freq_factor", "high_freq_factor",
                             "original_max_position_embeddings"});
  } else {
    ZS_CHECK(type == "default", kBad,
             "{}: \"{}.{}\" is \"{}\"; zeroshard's rotary positions implement rope_type "
             "default, linear and llama3 (not dynamic, yarn, longrope or others)",
             where, name, type_key, type);
  }
  for (const auto& [key, value] : obj.items()) {
    const bool known = std::find(keys.begin(), keys.end(), key) != keys.end();
    const bool full_rotary = key == "partial_rotary_factor" && value == 1.0;
    ZS_CHECK(known || full_rotary, kBad, "{}: \"{}.{}\" is {}; zeroshard's rope_type {} takes {}",
             where, name, key, value.dump(), type,
             keys.size() == 2 ? std::string("no other key")
                              : fmt::format("{}", fmt::join(keys.begin() + 2, keys.end(), ", ")));
  }
  try {
    s.validate();
  } catch (const Error& e) {
    fail(kBad, "{}: \"{}\" is {}: {}", where, name, obj.dump(), e.what());
  }
  return s;
}

// rope_theta and rope scaling: 4.x's "rope_theta" and "rope_scaling", or 5.x's
// "rope_parameters" (its rope_theta over the top-level one). Both scalings given must agree.
void rope_of(const json& j, const std::string& where, GptArchitecture& a, HfConfig& c) {
  // Finite and above 1, as GptArchitecture::validate() wants it, named by its key here.
  auto checked = [&where](float theta, const char* key) {
    ZS_CHECK(std::isfinite(theta) && theta > 1.0f, kBad,
             "{}: \"{}\" is {}; rotary positions need a finite theta above 1", where, key, theta);
    return theta;
  };
  a.rope_theta = checked(optional_field<float>(j, "rope_theta", 10000.0f, where), "rope_theta");
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    a.rope_scaling = rope_scaling_in(j.at("rope_scaling"), "rope_scaling", where);
  if (!j.contains("rope_parameters") || j.at("rope_parameters").is_null()) return;
  const json& rp = j.at("rope_parameters");
  const RopeScaling s = rope_scaling_in(rp, "rope_parameters", where);
  ZS_CHECK(!a.rope_scaling.enabled() || !s.enabled() || s == a.rope_scaling, kBad,
           "{}: \"rope_scaling\" is {} but \"rope_parameters\" is {}", where,
           j.at("rope_scaling").dump(), rp.dump());
  if (s.enabled()) {
    a.rope_scaling = s;
    c.rope_field = "rope_parameters";
  }
  a.rope_theta = checked(optional_field<float>(rp, "rope_theta", a.rope_theta, where),
                         "rope_parameters.rope_theta");
}

// rope_scaling as transformers 4.x writes it (rope_type, which 4.x and 5.x both read); null for
// none.
json rope_scaling_json(const RopeScaling& s) {
  switch (s.kind) {
    case RopeScalingKind::kNone:
      return nullptr;
    case RopeScalingKind::kLinear:
      return {{"rope_type", "linear"}, {"factor", s.factor}};
    case RopeScalingKind::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_context}};
  }
  return nullptr;
}

// Fields of the Llama family that would change what the model computes and that our decoder does
// not do: refused naming them.
void refuse_unsupported(const json& j, const std::string& where) {
  const std::string act = optional_field<std::string>(j, "hidden_act", "silu", where);
  ZS_CHECK(act == "silu", kBad,
           "{}: \"hidden_act\" is \"{}\"; zeroshard's SwiGLU computes silu(gate) * up", where, act);
  ZS_CHECK(!optional_field<bool>(j, "use_sliding_window", false, where), kBad,
           "{}: \"use_sliding_window\" is true; sliding-window attention is not implemented",
           where);
  if (j.contains("layer_types") && j.at("layer_types").is_array()) {
    for (const json& t : j.at("layer_types")) {
      ZS_CHECK(t == "full_attention", kBad,
               "{}: \"layer_types\" holds {}; only full_attention layers are implemented", where,
               t.dump());
    }
  }
  for (const char* moe : {"num_local_experts", "num_experts", "num_experts_per_tok",
                          "n_routed_experts", "moe_intermediate_size"}) {
    const bool on = j.contains(moe) && !j.at(moe).is_null() && j.at(moe) != 0;
    ZS_CHECK(!on, kBad, "{}: \"{}\" is {}; mixture-of-experts layers are not implemented", where,
             moe, on ? j.at(moe).dump() : "");
  }
}

// head_dim: hidden_size / num_attention_heads unless config.json says otherwise (Qwen3Config's
// default 128 when absent); kept in head_dim_override only when it differs, so a Llama config
// with the redundant field parses to the architecture without it.
void head_dim_of(const json& j, const std::string& where, HfConfig& c) {
  GptArchitecture& a = c.arch;
  const bool divides = a.width % a.heads == 0;
  int fallback = divides ? a.width / a.heads : 0;
  if (c.family == HfFamily::kQwen3) fallback = kQwen3DefaultHeadDim;
  int head_dim = fallback;
  if (j.contains("head_dim") && !j.at("head_dim").is_null())
    head_dim = positive(j, "head_dim", where);
  ZS_CHECK(head_dim > 0, kBad,
           "{}: \"hidden_size\" {} does not divide by \"num_attention_heads\" {} and \"head_dim\" "
           "is missing",
           where, a.width, a.heads);
  a.head_dim_override = divides && head_dim == a.width / a.heads ? 0 : head_dim;
}

void parse_llama_family(const json& j, const std::string& where, HfConfig& c) {
  GptArchitecture& a = c.arch;
  a.layers = positive(j, "num_hidden_layers", where);
  a.heads = positive(j, "num_attention_heads", where);
  a.width = positive(j, "hidden_size", where);
  a.kv_heads = a.heads;
  if (j.contains("num_key_value_heads") && !j.at("num_key_value_heads").is_null())
    a.kv_heads = positive(j, "num_key_value_heads", where);
  a.ffn = positive(j, "intermediate_size", where);
  a.vocab = positive(j, "vocab_size", where);
  a.context = c.max_positions = positive(j, "max_position_embeddings", where);
  head_dim_of(j, where, c);
  a.norm = NormKind::kRMSNorm;
  a.norm_eps = optional_field<float>(j, "rms_norm_eps", 1e-6f, where);
  a.positions = PositionKind::kRotary;
  rope_of(j, where, a, c);
  a.mlp = MlpKind::kSwiGLU;
  const bool attention_bias = optional_field<bool>(j, "attention_bias", false, where);
  // Llama and Qwen3: attention_bias on q/k/v and o alike; Qwen2: q/k/v biases always.
  const bool llama_biases = c.family == HfFamily::kLlama || c.family == HfFamily::kQwen3;
  a.qkv_bias = c.family == HfFamily::kQwen2 || (llama_biases && attention_bias);
  a.proj_bias = llama_biases && attention_bias;
  a.mlp_bias = c.family == HfFamily::kLlama && optional_field<bool>(j, "mlp_bias", false, where);
  a.qk_norm = c.family == HfFamily::kQwen3;  // Qwen3Attention's q_norm and k_norm
  refuse_unsupported(j, where);
  if (c.family == HfFamily::kMistral)
    c.sliding_window = optional_field<int>(j, "sliding_window", 0, where);
  c.tied = optional_field<bool>(j, "tie_word_embeddings", false, where);
  c.arch.tied_embeddings = c.tied;
}

struct IntField {
  const char* hf;
  const char* ours;
  int theirs, mine;
};
struct FloatField {
  const char* hf;
  const char* ours;
  float theirs, mine;
};

}  // namespace

const char* hf_model_type(HfFamily f) {
  switch (f) {
    case HfFamily::kGpt2:
      return "gpt2";
    case HfFamily::kLlama:
      return "llama";
    case HfFamily::kMistral:
      return "mistral";
    case HfFamily::kQwen2:
      return "qwen2";
    case HfFamily::kQwen3:
      return "qwen3";
  }
  return "?";
}

const char* hf_class_name(HfFamily f) {
  switch (f) {
    case HfFamily::kGpt2:
      return "GPT2LMHeadModel";
    case HfFamily::kLlama:
      return "LlamaForCausalLM";
    case HfFamily::kMistral:
      return "MistralForCausalLM";
    case HfFamily::kQwen2:
      return "Qwen2ForCausalLM";
    case HfFamily::kQwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

HfConfig parse_hf_config(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  ZS_CHECK(!j.is_discarded() && j.is_object(), kBad, "{}: not a JSON object", where);
  HfConfig c;
  c.family = family_of(j, where);
  if (c.family == HfFamily::kGpt2)
    parse_gpt2(j, where, c);
  else
    parse_llama_family(j, where, c);
  try {
    c.arch.validate();
  } catch (const Error& e) {
    fail(kBad, "{}: {}", where, e.what());
  }
  return c;
}

GptArchitecture hf_run_architecture(const HfConfig& hf, int context, const std::string& where) {
  GptArchitecture a = hf.arch;
  a.tied_embeddings = hf.tied;  // one parameter ([Note: tied parameters] in unit/unit.h)
  if (a.positions == PositionKind::kLearned) {
    ZS_CHECK(context == hf.max_positions, kBad,
             "{}: \"n_positions\" is {}, the model's context is {}", where, hf.max_positions,
             context);
    return a;
  }
  ZS_CHECK(context > 0 && context <= hf.max_positions, kBad,
           "{}: \"max_position_embeddings\" is {}, the run's context {} is not in 1..{}", where,
           hf.max_positions, context, hf.max_positions);
  ZS_CHECK(hf.sliding_window == 0 || context <= hf.sliding_window, kBad,
           "{}: \"sliding_window\" is {}, shorter than the run's context {} (--context); "
           "sliding-window attention is not implemented (a window of at least the context "
           "changes nothing)",
           where, hf.sliding_window, context);
  a.context = context;
  return a;
}

void check_hf_config(const HfConfig& hf, const GptArchitecture& model, const std::string& where) {
  const GptArchitecture run = hf_run_architecture(hf, model.context, where);
  const bool gpt2 = hf.family == HfFamily::kGpt2;
  const IntField ints[] = {
      {gpt2 ? "n_layer" : "num_hidden_layers", "layers", run.layers, model.layers},
      {gpt2 ? "n_head" : "num_attention_heads", "heads", run.heads, model.heads},
      {"num_key_value_heads", "kv heads", run.kv_heads_or_heads(), model.kv_heads_or_heads()},
      // The width before the head dim: without an explicit head_dim both follow the width, and
      // the width is what the user set.
      {gpt2 ? "n_embd" : "hidden_size", "width", run.width, model.width},
      {"head_dim", "head dim", run.head_dim(), model.head_dim()},
      {"vocab_size", "vocab", run.vocab, model.vocab},
      {gpt2 ? "n_inner" : "intermediate_size", "ffn width", run.ffn_width(), model.ffn_width()},
      {"tie_word_embeddings", "tied embeddings (0/1)", run.tied_embeddings, model.tied_embeddings},
  };
  for (const IntField& f : ints) {
    ZS_CHECK(f.theirs == f.mine, kBad, "{}: \"{}\" is {}, the model's {} is {}", where, f.hf,
             f.theirs, f.ours, f.mine);
  }
  // GPT-2 has no rope_theta: its row compares the model's with itself.
  const FloatField floats[] = {
      {gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", "norm_eps", run.norm_eps, model.norm_eps},
      {"rope_theta", "rope_theta", gpt2 ? model.rope_theta : run.rope_theta, model.rope_theta},
  };
  for (const FloatField& f : floats) {
    ZS_CHECK(f.theirs == f.mine, kBad, "{}: \"{}\" is {}, the model's {} is {}", where, f.hf,
             f.theirs, f.ours, f.mine);
  }
  ZS_CHECK(gpt2 || run.rope_scaling == model.rope_scaling, kBad,
           "{}: \"{}\" is {}, the model's rope scaling is {}", where, hf.rope_field,
           rope_scaling_text(run.rope_scaling), rope_scaling_text(model.rope_scaling));
  ZS_CHECK(run.norm == model.norm && run.positions == model.positions && run.mlp == model.mlp &&
               run.qkv_bias == model.qkv_bias && run.proj_bias == model.proj_bias &&
               run.mlp_bias == model.mlp_bias && run.qk_norm == model.qk_norm,
           kBad,
           "{}: \"model_type\" is \"{}\" ({}, {} positions, {}, biases qkv {} proj {} mlp {}, "
           "qk_norm {}), the model has {}, {} positions, {}, biases qkv {} proj {} mlp {}, qk_norm "
           "{}",
           where, hf_model_type(hf.family), norm_kind_name(run.norm),
           position_kind_name(run.positions), mlp_kind_name(run.mlp), run.qkv_bias, run.proj_bias,
           run.mlp_bias, run.qk_norm, norm_kind_name(model.norm),
           position_kind_name(model.positions), mlp_kind_name(model.mlp), model.qkv_bias,
           model.proj_bias, model.mlp_bias, model.qk_norm);
}

HfFamily hf_family_of(const GptArchitecture& a) {
  auto need = [](bool ok, const char* component, const std::string& has, const char* cls,
                 const char* wants) {
    ZS_CHECK(ok, kBad,
             "hf export: the model's {} is {}; {} needs {} (no Hugging Face class maps this mix "
             "of components)",
             component, has, cls, wants);
  };
  if (a.norm == NormKind::kLayerNorm) {
    const char* cls = "GPT2LMHeadModel";
    need(a.positions == PositionKind::kLearned, "positions", position_kind_name(a.positions), cls,
         "learned");
    need(a.mlp == MlpKind::kGelu, "mlp", mlp_kind_name(a.mlp), cls, "gelu");
    need(a.qkv_bias && a.proj_bias && a.mlp_bias, "biases", "off on some projection", cls,
         "every bias");
    need(a.kv_heads_or_heads() == a.heads, "kv_heads", std::to_string(a.kv_heads), cls,
         "kv_heads = heads");
    need(a.attn_width() == a.width, "head_dim", std::to_string(a.head_dim()), cls, "width / heads");
    need(!a.qk_norm, "qk_norm", "on", cls, "none");
    return HfFamily::kGpt2;
  }
  const char* cls = a.qk_norm ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
  need(a.positions == PositionKind::kRotary, "positions", position_kind_name(a.positions), cls,
       "rotary");
  need(a.mlp == MlpKind::kSwiGLU, "mlp", mlp_kind_name(a.mlp), cls, "swiglu");
  if (a.qk_norm) {
    need(!a.mlp_bias, "mlp_bias", "on", cls, "no MLP bias");
    need(a.qkv_bias == a.proj_bias, "proj_bias", a.proj_bias ? "on" : "off", cls,
         "the same as qkv_bias (attention_bias)");
    return HfFamily::kQwen3;
  }
  if (a.qkv_bias && !a.proj_bias && !a.mlp_bias) return HfFamily::kQwen2;
  need(a.qkv_bias == a.proj_bias, "proj_bias", a.proj_bias ? "on" : "off",
       "LlamaForCausalLM (or Qwen2ForCausalLM)",
       "the same as qkv_bias (attention_bias), or q/k/v biases only");
  return HfFamily::kLlama;
}

std::string hf_config_json(const GptArchitecture& a, DType dtype) {
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, kBad,
           "hf export: dtype {} (fp32 or bf16 expected)", dtype_name(dtype));
  const HfFamily f = hf_family_of(a);
  json j;  // keys sorted, as transformers writes them
  j["architectures"] = {hf_class_name(f)};
  j["model_type"] = hf_model_type(f);
  j["vocab_size"] = a.vocab;
  j["tie_word_embeddings"] = a.tied_embeddings;  // tied: no lm_head.weight in the file
  j["torch_dtype"] = dtype == DType::kF32 ? "float32" : "bfloat16";
  j["use_cache"] = true;
  j["initializer_range"] = 0.02;
  // The vocabulary is the run's own: no special token ids (GPT-2's 50256 would be out of range).
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  if (f == HfFamily::kGpt2) {
    j["n_positions"] = j["n_ctx"] = a.context;
    j["n_embd"] = a.width;
    j["n_layer"] = a.layers;
    j["n_head"] = a.heads;
    j["n_inner"] = a.ffn_width();
    j["activation_function"] = "gelu_new";  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    j["layer_norm_epsilon"] = json_float(a.norm_eps);
    j["resid_pdrop"] = j["embd_pdrop"] = j["attn_pdrop"] = 0.0;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
    return j.dump(2) + "\n";
  }
  j["hidden_size"] = a.width;
  j["num_hidden_layers"] = a.layers;
  j["num_attention_heads"] = a.heads;
  j["num_key_value_heads"] = a.kv_heads_or_heads();
  j["intermediate_size"] = a.ffn_width();
  j["max_position_embeddings"] = a.context;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = json_float(a.norm_eps);
  j["rope_theta"] = json_float(a.rope_theta);
  j["attention_dropout"] = 0.0;
  // Qwen3Config's head_dim defaults to 128, not hidden_size / num_attention_heads: always written.
  if (f == HfFamily::kQwen3 || a.head_dim_override > 0) j["head_dim"] = a.head_dim();
  if (f == HfFamily::kLlama) {
    j["attention_bias"] = a.qkv_bias;
    j["mlp_bias"] = a.mlp_bias;
    j["rope_scaling"] = rope_scaling_json(a.rope_scaling);
    j["pretraining_tp"] = 1;
  } else {
    if (f == HfFamily::kQwen3) j["attention_bias"] = a.qkv_bias;
    if (a.rope_scaling.enabled()) j["rope_scaling"] = rope_scaling_json(a.rope_scaling);
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = a.layers;
  }
  return j.dump(2) + "\n";
}

}  // namespace zs::nn
