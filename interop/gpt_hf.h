// The GPT (nn/gpt_model_base.h) as Hugging Face transformers' GPT-2 (GPT2LMHeadModel): the
// mapping of names and layouts, config.json, and export/import of a directory that
// `GPT2LMHeadModel.from_pretrained(dir)` loads as it is (docs/interop.md).
//
// A directory holds model.safetensors (HF names and layouts) and config.json. The mapping:
//   embed.wte [V, C]             transformer.wte.weight [V, C]
//   embed.wpe [T, C]             transformer.wpe.weight [T, C]
//   block.i.ln1.weight/bias      transformer.h.i.ln_1.weight/bias
//   block.i.qkv.weight [3C, C]   transformer.h.i.attn.c_attn.weight [C, 3C]   transposed
//   block.i.qkv.bias [3C]        transformer.h.i.attn.c_attn.bias
//   block.i.proj.weight [C, C]   transformer.h.i.attn.c_proj.weight [C, C]    transposed
//   block.i.proj.bias            transformer.h.i.attn.c_proj.bias
//   block.i.ln2.weight/bias      transformer.h.i.ln_2.weight/bias
//   block.i.fc.weight [F, C]     transformer.h.i.mlp.c_fc.weight [C, F]       transposed
//   block.i.fc.bias [F]          transformer.h.i.mlp.c_fc.bias
//   block.i.fc_proj.weight [C,F] transformer.h.i.mlp.c_proj.weight [F, C]     transposed
//   block.i.fc_proj.bias         transformer.h.i.mlp.c_proj.bias
//   head.ln_f.weight/bias        transformer.ln_f.weight/bias
//   head.lm_head.weight [V, C]   lm_head.weight [V, C]; with tie_word_embeddings (HF's default)
//                                transformer.wte.weight, untied on import
// HF's Conv1D computes x @ W + b with W [in, out], our Linear x @ W^T + b with W [out, in]: the
// four block matrices are transposed. c_attn's output splits into q | k | v of C columns each,
// head h at columns h*hd of each, as our attention reads qkv: the same order, no permutation.
// Our compute is GELU's tanh approximation ("gelu_new") and layer norm eps 1e-5.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "collectives/communicator.h"
#include "core/dtype.h"
#include "nn/gpt_config.h"
#include "runtime/engine.h"

namespace zs::nn {

// A GPT-2 config.json as far as our GPT is concerned.
struct GptHfConfig {
  // layers (n_layer), heads (n_head), width (n_embd), context (n_positions), vocab (vocab_size),
  // ffn_mult (n_inner / n_embd; n_inner null means 4).
  GptArchitecture arch;
  bool tied = true;  // tie_word_embeddings: lm_head.weight is transformer.wte.weight
};

// The tensor of one parameter of unit `unit` ("embed", "block.<i>", "head") in an HF GPT-2
// file; `tied`: lm_head.weight reads transformer.wte.weight. Throws zs::Error(kInvalidArgument)
// for a unit or parameter the GPT does not have.
safetensors::TensorName gpt_hf_tensor_name(const std::string& unit, const ParamSpec& param,
                                           bool tied = false);
// HF GPT-2 tensors that are not parameters and are skipped on import: the attention's causal
// mask buffers (transformer.h.<i>.attn.bias, .attn.masked_bias) that older checkpoints hold.
bool gpt_hf_ignorable(const std::string& name);

// config.json for `arch` (model_type gpt2, GPT2LMHeadModel, untied embeddings, gelu_new, eps 1e-5,
// no dropout, no bos/eos ids: the vocabulary is bytes); torch_dtype from `dtype` (fp32 or bf16).
std::string gpt_hf_config_json(const GptArchitecture& arch, DType dtype = DType::kF32);
// Parses config.json text. Throws zs::Error(kInvalidArgument) naming `where` and the field: not
// JSON, model_type other than gpt2, a missing or non-positive size, n_inner not a multiple of
// n_embd, an activation other than the tanh GELU, layer_norm_epsilon other than 1e-5, attention
// scaling our GPT does not do.
GptHfConfig parse_gpt_hf_config(const std::string& text, const std::string& where);
// Throws zs::Error(kInvalidArgument) naming `where`, the config.json field and both values at the
// first field of `hf` that differs from `model`.
void check_gpt_hf_config(const GptHfConfig& hf, const GptArchitecture& model,
                         const std::string& where);

// Writes DIR/model.safetensors (the master weights under HF names and layouts, as `dtype`: fp32
// or bf16) and DIR/config.json, creating DIR when missing. `c` is the engine's model's config.
// Collective (safetensors::export_model).
void export_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& c, const std::string& dir,
                   DType dtype = DType::kF32);

struct GptHfImport {
  GptHfConfig config;                // what DIR/config.json says
  bool untied = false;               // lm_head.weight was initialised from transformer.wte.weight
  std::vector<std::string> ignored;  // tensors of the file skipped (gpt_hf_ignorable, or a stored
                                     // lm_head.weight that tie_word_embeddings overrides)
};
// Reads DIR/config.json (rank 0, shared with every rank), checks it against `model` (the engine's
// model's config), then sets the master weights from DIR/model.safetensors (F32, BF16 or F16),
// each tensor checked for shape and finite values. Tied embeddings are untied: lm_head.weight
// starts as a copy of transformer.wte.weight and trains on its own. Errors as
// safetensors::import_model, thrown on every rank; nothing is changed unless all succeeded.
// Collective.
GptHfImport import_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& model,
                          const std::string& dir);
// DIR/config.json parsed (to size a model from it). Collective.
GptHfConfig read_gpt_hf_config(Communicator& comm, const std::string& dir);

}  // namespace zs::nn
