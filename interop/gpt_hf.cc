#include "interop/gpt_hf.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "interop/gpt_lora_io.h"
#include "nn/gpt_specs.h"

namespace zs::nn {
namespace {

using nlohmann::json;

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kConfig = "config.json";
constexpr double kLayerNormEps = 1e-5;  // nn/layernorm.cc

struct BlockName {
  const char* ours;
  const char* hf;  // after "transformer.h.<i>."
  bool transposed;
};
// In gpt_block_specs() order.
constexpr BlockName kBlockNames[] = {
    {"ln1.weight", "ln_1.weight", false},          {"ln1.bias", "ln_1.bias", false},
    {"qkv.weight", "attn.c_attn.weight", true},    {"qkv.bias", "attn.c_attn.bias", false},
    {"proj.weight", "attn.c_proj.weight", true},   {"proj.bias", "attn.c_proj.bias", false},
    {"ln2.weight", "ln_2.weight", false},          {"ln2.bias", "ln_2.bias", false},
    {"fc.weight", "mlp.c_fc.weight", true},        {"fc.bias", "mlp.c_fc.bias", false},
    {"fc_proj.weight", "mlp.c_proj.weight", true}, {"fc_proj.bias", "mlp.c_proj.bias", false},
};

[[noreturn]] void no_name(const std::string& unit, const ParamSpec& p) {
  fail(ErrorCode::kInvalidArgument, "gpt hf: no Hugging Face name for {}.{}", unit, p.name);
}

// A positive integer field; `fallback` (another spelling) when `key` is absent.
int positive(const json& j, const std::string& key, const std::string& where,
             const char* fallback = nullptr) {
  std::string k = key;
  if (!j.contains(k) && fallback && j.contains(fallback)) k = fallback;
  ZS_CHECK(j.contains(k), ErrorCode::kInvalidArgument, "{}: \"{}\" is missing", where, key);
  const json& v = j.at(k);
  ZS_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (1 << 30),
           ErrorCode::kInvalidArgument, "{}: \"{}\" is {}, a positive integer expected", where, k,
           v.dump());
  return v.get<int>();
}

// An optional field of type T with a default.
template <typename T>
T optional_field(const json& j, const char* key, T dflt, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(ErrorCode::kInvalidArgument, "{}: \"{}\" is {}, not of the expected type", where, key,
         j.at(key).dump());
  }
}

}  // namespace

safetensors::TensorName gpt_hf_tensor_name(const std::string& unit, const ParamSpec& p, bool tied) {
  if (unit == "embed") {
    if (p.name == "wte") return {"transformer.wte.weight", false};
    if (p.name == "wpe") return {"transformer.wpe.weight", false};
  } else if (unit == "head") {
    if (p.name == "ln_f.weight" || p.name == "ln_f.bias") return {"transformer." + p.name, false};
    if (p.name == "lm_head.weight")
      return {tied ? "transformer.wte.weight" : "lm_head.weight", false};
  } else if (unit.rfind("block.", 0) == 0) {
    const std::string index = unit.substr(6);
    const bool digits =
        !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
    for (const BlockName& b : kBlockNames) {
      if (digits && p.name == b.ours) return {"transformer.h." + index + "." + b.hf, b.transposed};
    }
  }
  no_name(unit, p);
}

bool gpt_hf_ignorable(const std::string& name) {
  const std::string prefix = "transformer.h.";
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  const std::string rest = name.substr(dot + 1);
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

std::string gpt_hf_config_json(const GptArchitecture& arch, DType dtype) {
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "gpt hf: export dtype {} (fp32 or bf16 expected)", dtype_name(dtype));
  nlohmann::ordered_json j;
  j["model_type"] = "gpt2";
  j["architectures"] = {"GPT2LMHeadModel"};
  j["vocab_size"] = arch.vocab;
  j["n_positions"] = arch.context;
  j["n_ctx"] = arch.context;
  j["n_embd"] = arch.width;
  j["n_layer"] = arch.layers;
  j["n_head"] = arch.heads;
  j["n_inner"] = arch.ffn_width();
  j["activation_function"] = "gelu_new";  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  j["layer_norm_epsilon"] = kLayerNormEps;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  j["initializer_range"] = 0.02;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
  j["tie_word_embeddings"] = false;  // our lm_head.weight is a parameter of its own
  // Byte-level vocabulary: no special tokens (GPT-2's 50256 would be out of range).
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["torch_dtype"] = dtype == DType::kF32 ? "float32" : "bfloat16";
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

GptHfConfig parse_gpt_hf_config(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  ZS_CHECK(!j.is_discarded() && j.is_object(), ErrorCode::kInvalidArgument, "{}: not a JSON object",
           where);
  const std::string type = optional_field<std::string>(j, "model_type", "gpt2", where);
  ZS_CHECK(type == "gpt2", ErrorCode::kInvalidArgument,
           "{}: \"model_type\" is \"{}\"; only gpt2 maps onto zeroshard's GPT", where, type);
  GptHfConfig c;
  c.arch.layers = positive(j, "n_layer", where);
  c.arch.heads = positive(j, "n_head", where);
  c.arch.width = positive(j, "n_embd", where);
  c.arch.context = positive(j, "n_positions", where, "n_ctx");
  c.arch.vocab = positive(j, "vocab_size", where);
  int inner = 4 * c.arch.width;
  if (j.contains("n_inner") && !j.at("n_inner").is_null()) inner = positive(j, "n_inner", where);
  ZS_CHECK(inner % c.arch.width == 0, ErrorCode::kInvalidArgument,
           "{}: \"n_inner\" {} is not a multiple of \"n_embd\" {} (our F = ffn_mult * width)",
           where, inner, c.arch.width);
  c.arch.ffn_mult = inner / c.arch.width;
  ZS_CHECK(c.arch.width % c.arch.heads == 0, ErrorCode::kInvalidArgument,
           "{}: \"n_embd\" {} does not divide by \"n_head\" {}", where, c.arch.width, c.arch.heads);
  const std::string act = optional_field<std::string>(j, "activation_function", "gelu_new", where);
  ZS_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", ErrorCode::kInvalidArgument,
           "{}: \"activation_function\" is \"{}\"; zeroshard's GPT computes GELU's tanh "
           "approximation (gelu_new or gelu_pytorch_tanh)",
           where, act);
  const double eps = optional_field<double>(j, "layer_norm_epsilon", kLayerNormEps, where);
  ZS_CHECK(std::abs(eps - kLayerNormEps) <= 1e-6 * kLayerNormEps, ErrorCode::kInvalidArgument,
           "{}: \"layer_norm_epsilon\" is {}; zeroshard's layer norm uses 1e-05", where, eps);
  ZS_CHECK(optional_field<bool>(j, "scale_attn_weights", true, where), ErrorCode::kInvalidArgument,
           "{}: \"scale_attn_weights\" is false; zeroshard's attention scales by 1/sqrt(head dim)",
           where);
  ZS_CHECK(!optional_field<bool>(j, "scale_attn_by_inverse_layer_idx", false, where),
           ErrorCode::kInvalidArgument,
           "{}: \"scale_attn_by_inverse_layer_idx\" is true; zeroshard's attention does not",
           where);
  c.tied = optional_field<bool>(j, "tie_word_embeddings", true, where);
  return c;
}

void check_gpt_hf_config(const GptHfConfig& hf, const GptArchitecture& model,
                         const std::string& where) {
  struct Field {
    const char* hf;
    const char* ours;
    int theirs, mine;
  };
  const Field fields[] = {
      {"n_layer", "layers", hf.arch.layers, model.layers},
      {"n_head", "heads", hf.arch.heads, model.heads},
      {"n_embd", "width", hf.arch.width, model.width},
      {"n_positions", "context", hf.arch.context, model.context},
      {"vocab_size", "vocab", hf.arch.vocab, model.vocab},
      {"n_inner", "ffn width", hf.arch.ffn_width(), model.ffn_width()},
  };
  for (const Field& f : fields) {
    ZS_CHECK(f.theirs == f.mine, ErrorCode::kInvalidArgument,
             "{}: \"{}\" is {}, the model's {} is {}", where, f.hf, f.theirs, f.ours, f.mine);
  }
}

void export_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& c, const std::string& dir,
                   DType dtype) {
  safetensors::ExportOptions o;
  o.dtype = dtype;
  o.namer = [](const std::string& unit, const ParamSpec& p) {
    // Adapters are merged into their weights, not written (interop/gpt_lora_io.h).
    if (is_lora_param(p)) return safetensors::default_tensor_name(unit, p);
    return gpt_hf_tensor_name(unit, p, false);
  };
  merge_lora_on_export(c, o);
  o.side_files[kConfig] = gpt_hf_config_json(c.arch, dtype);
  o.create_directory = true;
  safetensors::export_model(engine, comm, (std::filesystem::path(dir) / kWeights).string(), o);
}

GptHfConfig read_gpt_hf_config(Communicator& comm, const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kConfig).string();
  return parse_gpt_hf_config(safetensors::read_side_file(comm, path), path);
}

GptHfImport import_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& model,
                          const std::string& dir) {
  GptHfImport r;
  r.config = read_gpt_hf_config(comm, dir);
  check_gpt_hf_config(r.config, model.arch, (std::filesystem::path(dir) / kConfig).string());
  const bool tied = r.config.tied;
  safetensors::ImportOptions o;
  o.namer = [tied](const std::string& unit, const ParamSpec& p) {
    if (is_lora_param(p)) return safetensors::default_tensor_name(unit, p);
    return gpt_hf_tensor_name(unit, p, tied);
  };
  lora_optional_on_import(model.adapters.lora, o);  // a GPT-2 directory has no adapters
  // Tied: HF's model uses transformer.wte.weight as its output matrix whatever lm_head.weight a
  // file holds, and so do we.
  o.ignorable = [tied](const std::string& name) {
    return gpt_hf_ignorable(name) || (tied && name == "lm_head.weight");
  };
  const std::string weights = (std::filesystem::path(dir) / kWeights).string();
  try {
    r.ignored = safetensors::import_model(engine, comm, weights, o).ignored;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
    throw Error(e.code(), fmt::format("{} (save the model with save_pretrained(dir, "
                                      "safe_serialization=True); pytorch_model.bin and sharded "
                                      "checkpoints are not read)",
                                      e.what()));
  }
  r.untied = tied;
  return r;
}

}  // namespace zs::nn
