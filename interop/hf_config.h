// Hugging Face config.json <-> nn::GptArchitecture, for every family zeroshard's decoder maps onto
// (docs/interop.md): GPT2LMHeadModel (model_type gpt2), LlamaForCausalLM (llama),
// MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2) and Qwen3ForCausalLM (qwen3: q/k norms,
// head_dim apart from hidden_size / num_attention_heads), as transformers 4.x and 5.x write
// them (5.x: "rope_parameters" {rope_theta, rope_type, ...} for rope_theta/rope_scaling, "dtype"
// for "torch_dtype"). Rope scaling: rope_type default, linear and llama3 (Llama-3.1/3.2),
// nn/rope_scaling.h. A field that would change what the model computes and that our decoder does
// not do is refused, naming the field and its value; Gemma (gemma, gemma2, gemma3) is refused
// naming the components it has and the decoder lacks.
#pragma once

#include <string>

#include "core/dtype.h"
#include "models/gpt/gpt_architecture.h"

namespace zs::nn {

// The Hugging Face families: GPT-2's names and layouts (HfFamily::kGpt2) or Llama's (the others).
enum class HfFamily { kGpt2, kLlama, kMistral, kQwen2, kQwen3 };

// "gpt2", "llama", "mistral", "qwen2", "qwen3" (model_type).
const char* hf_model_type(HfFamily f);
// "GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
// "Qwen3ForCausalLM".
const char* hf_class_name(HfFamily f);

// A config.json as far as our decoder is concerned.
struct HfConfig {
  HfFamily family = HfFamily::kGpt2;
  // The architecture; its context is n_positions (GPT-2) or max_position_embeddings (rotary
  // positions, where a run may use any context up to it: hf_run_architecture).
  GptArchitecture arch;
  int max_positions = 0;  // n_positions / max_position_embeddings
  // Mistral's sliding_window (0: none or null): a window at least the run's context changes
  // nothing; a shorter one is refused (hf_run_architecture).
  int sliding_window = 0;
  bool tied = true;  // tie_word_embeddings (GPT-2's default true, the Llama family's false)
  // The field arch.rope_scaling came from: "rope_scaling" (4.x; also when none) or
  // "rope_parameters" (5.x).
  const char* rope_field = "rope_scaling";
};

// Parses config.json text. Throws zs::Error(kInvalidArgument) naming `where`, the field and its
// value: not JSON; another model_type or architectures class; a missing or non-positive size;
// an activation our decoder does not compute (GPT-2: gelu_new / gelu_pytorch_tanh; Llama family:
// silu); rope scaling other than linear and llama3 (rope_scaling's or rope_parameters' rope_type
// dynamic, yarn, longrope...; a missing, malformed or unknown key of theirs); an active sliding
// window (use_sliding_window true, a layer_types entry other than full_attention); MoE fields;
// GPT-2's attention scalings our attention does not do; Gemma's families (model_type gemma,
// gemma2, gemma3, gemma3_text or a Gemma*ForCausalLM class), naming what they compute that the
// decoder does not. head_dim (Llama family) sets GptArchitecture::head_dim_override when it is not
// hidden_size / num_attention_heads (qwen3: Qwen3Config's 128 when absent); qwen3 sets qk_norm and
// takes attention_bias for q/k/v and o alike.
HfConfig parse_hf_config(const std::string& text, const std::string& where);

// hf's architecture with a run's context: GPT-2's is n_positions (a different `context` is
// refused); a rotary model's is `context`, at most max_position_embeddings and at most Mistral's
// sliding_window (a window that covers the context masks nothing). Throws
// zs::Error(kInvalidArgument) naming `where`, the field and both values.
GptArchitecture hf_run_architecture(const HfConfig& hf, int context, const std::string& where);

// Throws zs::Error(kInvalidArgument) naming `where`, the config.json field and both values at the
// first field of `hf` that differs from `model` (the context as hf_run_architecture allows it).
void check_hf_config(const HfConfig& hf, const GptArchitecture& model, const std::string& where);

// The family whose names and config.json `arch` is exported as: GPT-2's components (LayerNorm,
// learned positions, GELU, every bias, no grouped-query attention) -> kGpt2; RMSNorm, rotary,
// SwiGLU with q/k/v and o biases alike -> kLlama (attention_bias, mlp_bias); q/k/v biases only ->
// kQwen2; with qk_norm (q/k/v and o biases alike, no MLP bias) -> kQwen3. Any other mix:
// zs::Error(kInvalidArgument) naming the component.
HfFamily hf_family_of(const GptArchitecture& arch);

// config.json for `arch` as transformers 4.x writes it for hf_family_of(arch)'s class,
// rope_scaling {rope_type, factor, ...} (Llama: null without scaling), tie_word_embeddings as
// arch.tied_embeddings, no dropout, no special token ids (the vocabulary is
// the run's own); torch_dtype from `dtype` (fp32 or bf16); head_dim written for Qwen3 always and
// for Llama when it is not hidden_size / num_attention_heads.
std::string hf_config_json(const GptArchitecture& arch, DType dtype = DType::kF32);

}  // namespace zs::nn
