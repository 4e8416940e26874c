// Our decoder's parameters under Hugging Face transformers' names and layouts (docs/interop.md),
// for the GPT-2 family (GPT2LMHeadModel) and the Llama family (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM share the names).
//
// GPT-2 (HF's Conv1D stores [in, out]: the four block matrices are transposed):
//   embed.wte / wpe              transformer.wte.weight / transformer.wpe.weight
//   block.i.ln1.weight/bias      transformer.h.i.ln_1.weight/bias
//   block.i.qkv.weight [3C, C]   transformer.h.i.attn.c_attn.weight [C, 3C]   transposed
//   block.i.proj.weight [C, C]   transformer.h.i.attn.c_proj.weight           transposed
//   block.i.ln2.weight/bias      transformer.h.i.ln_2.weight/bias
//   block.i.fc.weight [F, C]     transformer.h.i.mlp.c_fc.weight [C, F]       transposed
//   block.i.fc_proj.weight [C,F] transformer.h.i.mlp.c_proj.weight [F, C]     transposed
//   (each bias beside its weight, not transposed)
//   head.ln_f.weight/bias        transformer.ln_f.weight/bias
//   head.lm_head.weight          lm_head.weight; tied: none (the model's is wte)
// c_attn's output splits into q | k | v of C columns each, as our qkv rows: no permutation.
//
// Llama family (nn.Linear stores [out, in] as we do: nothing is transposed):
//   embed.wte                    model.embed_tokens.weight
//   block.i.ln1.weight           model.layers.i.input_layernorm.weight
//   block.i.qkv.weight/bias      rows [0, D) self_attn.q_proj, [D, D + KV hd) k_proj, then v_proj
//                                (D = H hd: C unless head_dim is set)
//   block.i.q_norm.weight [hd]   model.layers.i.self_attn.q_norm.weight (Qwen3)
//   block.i.k_norm.weight [hd]   model.layers.i.self_attn.k_norm.weight (Qwen3)
//   block.i.proj.weight/bias     model.layers.i.self_attn.o_proj.weight/bias [C, D]
//   block.i.ln2.weight           model.layers.i.post_attention_layernorm.weight
//   block.i.fc.weight/bias       rows [0, F) mlp.gate_proj, [F, 2F) mlp.up_proj
//   block.i.fc_proj.weight/bias  model.layers.i.mlp.down_proj.weight/bias
//   head.ln_f.weight             model.norm.weight
//   head.lm_head.weight          lm_head.weight; tied: none (the model's is wte)
// Our RoPE is transformers' rotate_half convention: q and k rows need no permutation.
#pragma once

#include <string>

#include "checkpoint/safetensors.h"
#include "interop/hf_config.h"
#include "models/gpt/gpt_architecture.h"
#include "unit/unit.h"

namespace zs::nn {

// The tensor(s) of one parameter of unit `unit` ("embed", "block.<i>", "head") of a model of
// architecture `arch` in family `family`'s file; `tied`: lm_head.weight reads the input
// embedding. Throws zs::Error(kInvalidArgument) for a unit or parameter the family does not have.
safetensors::TensorName hf_tensor_name(HfFamily family, const GptArchitecture& arch,
                                       const std::string& unit, const ParamSpec& param,
                                       bool tied = false);
// The GPT-2 family's: hf_tensor_name(HfFamily::kGpt2, ...).
safetensors::TensorName gpt_hf_tensor_name(const std::string& unit, const ParamSpec& param,
                                           bool tied = false);

// The input embedding's name: "transformer.wte.weight" (GPT-2) or "model.embed_tokens.weight".
const char* hf_embedding_name(HfFamily family);

// Tensors of an HF file that are not parameters and are skipped on import: GPT-2's attention
// mask buffers (transformer.h.<i>.attn.bias, .attn.masked_bias) and Llama's rotary inv_freq
// buffers (model.layers.<i>.self_attn.rotary_emb.inv_freq) that older checkpoints hold.
bool hf_ignorable(HfFamily family, const std::string& name);
bool gpt_hf_ignorable(const std::string& name);

}  // namespace zs::nn
