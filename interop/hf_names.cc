#include "interop/hf_names.h"

#include <vector>

#include "core/error.h"

namespace zs::nn {
namespace {

using safetensors::TensorName;
using safetensors::TensorPiece;

// A block parameter's HF name after the block's prefix.
struct BlockName {
  const char* ours;
  const char* hf;
  bool transposed;
};
// GPT-2, after "transformer.h.<i>.".
constexpr BlockName kGpt2Block[] = {
    {"ln1.weight", "ln_1.weight", false},          {"ln1.bias", "ln_1.bias", false},
    {"qkv.weight", "attn.c_attn.weight", true},    {"qkv.bias", "attn.c_attn.bias", false},
    {"proj.weight", "attn.c_proj.weight", true},   {"proj.bias", "attn.c_proj.bias", false},
    {"ln2.weight", "ln_2.weight", false},          {"ln2.bias", "ln_2.bias", false},
    {"fc.weight", "mlp.c_fc.weight", true},        {"fc.bias", "mlp.c_fc.bias", false},
    {"fc_proj.weight", "mlp.c_proj.weight", true}, {"fc_proj.bias", "mlp.c_proj.bias", false},
};
// Llama family, after "model.layers.<i>." (qkv and fc are assembled from pieces: llama_pieces).
constexpr BlockName kLlamaBlock[] = {
    {"ln1.weight", "input_layernorm.weight", false},
    {"q_norm.weight", "self_attn.q_norm.weight", false},
    {"k_norm.weight", "self_attn.k_norm.weight", false},
    {"proj.weight", "self_attn.o_proj.weight", false},
    {"proj.bias", "self_attn.o_proj.bias", false},
    {"ln2.weight", "post_attention_layernorm.weight", false},
    {"fc_proj.weight", "mlp.down_proj.weight", false},
    {"fc_proj.bias", "mlp.down_proj.bias", false},
};

[[noreturn]] void no_name(const std::string& unit, const ParamSpec& p) {
  fail(ErrorCode::kInvalidArgument, "hf: no Hugging Face name for {}.{}", unit, p.name);
}

// "<i>" of "block.<i>", or "" for another unit.
std::string block_index(const std::string& unit) {
  if (unit.rfind("block.", 0) != 0) return "";
  const std::string index = unit.substr(6);
  const bool digits = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos;
  return digits ? index : "";
}

// qkv.{weight,bias} and fc.{weight,bias} of a Llama block as their HF pieces (prefix
// "model.layers.<i>."); false for another parameter.
bool llama_pieces(const GptArchitecture& a, const std::string& prefix, const std::string& name,
                  TensorName& out) {
  const size_t dot = name.find('.');
  const std::string linear = name.substr(0, dot), kind = name.substr(dot + 1);
  const int64_t D = a.attn_width(), KV = static_cast<int64_t>(a.kv_heads_or_heads()) * a.head_dim();
  const int64_t F = a.ffn_width();
  if (linear == "qkv") {
    const std::string at = prefix + "self_attn.";
    out.pieces = {TensorPiece{at + "q_proj." + kind, 0, D},
                  TensorPiece{at + "k_proj." + kind, D, KV},
                  TensorPiece{at + "v_proj." + kind, D + KV, KV}};
    return true;
  }
  if (linear == "fc") {
    out.pieces = {TensorPiece{prefix + "mlp.gate_proj." + kind, 0, F},
                  TensorPiece{prefix + "mlp.up_proj." + kind, F, F}};
    return true;
  }
  return false;
}

TensorName llama_name(const GptArchitecture& a, const std::string& unit, const ParamSpec& p,
                      bool tied) {
  const char* embedding = hf_embedding_name(HfFamily::kLlama);
  if (unit == "embed" && p.name == "wte") return {embedding};
  if (unit == "head") {
    if (p.name == "ln_f.weight") return {"model.norm.weight"};
    if (p.name == "lm_head.weight") return {tied ? embedding : "lm_head.weight"};
  }
  const std::string index = block_index(unit);
  if (!index.empty()) {
    const std::string prefix = "model.layers." + index + ".";
    TensorName n;
    if (llama_pieces(a, prefix, p.name, n)) return n;
    for (const BlockName& b : kLlamaBlock) {
      if (p.name == b.ours) return {prefix + b.hf};
    }
  }
  no_name(unit, p);
}

// "<rest>" of "<prefix><digits>.<rest>", or "" when `name` is not of that form.
std::string after_layer(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return "";
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return "";
  return name.substr(dot + 1);
}

}  // namespace

const char* hf_embedding_name(HfFamily family) {
  return family == HfFamily::kGpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight";
}

TensorName gpt_hf_tensor_name(const std::string& unit, const ParamSpec& p, bool tied) {
  if (unit == "embed") {
    if (p.name == "wte") return {hf_embedding_name(HfFamily::kGpt2)};
    if (p.name == "wpe") return {"transformer.wpe.weight"};
  } else if (unit == "head") {
    if (p.name == "ln_f.weight" || p.name == "ln_f.bias") return {"transformer." + p.name};
    if (p.name == "lm_head.weight")
      return {tied ? hf_embedding_name(HfFamily::kGpt2) : "lm_head.weight"};
  } else if (const std::string index = block_index(unit); !index.empty()) {
    for (const BlockName& b : kGpt2Block) {
      if (p.name == b.ours) return {"transformer.h." + index + "." + b.hf, b.transposed};
    }
  }
  no_name(unit, p);
}

TensorName hf_tensor_name(HfFamily family, const GptArchitecture& arch, const std::string& unit,
                          const ParamSpec& param, bool tied) {
  if (family == HfFamily::kGpt2) return gpt_hf_tensor_name(unit, param, tied);
  return llama_name(arch, unit, param, tied);
}

bool gpt_hf_ignorable(const std::string& name) {
  const std::string rest = after_layer(name, "transformer.h.");
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

bool hf_ignorable(HfFamily family, const std::string& name) {
  if (family == HfFamily::kGpt2) return gpt_hf_ignorable(name);
  return after_layer(name, "model.layers.") == "self_attn.rotary_emb.inv_freq";
}

}  // namespace zs::nn
