// Our decoder (models/gpt/gpt_model_base.h) as a Hugging Face transformers directory that
// `AutoModelForCausalLM.from_pretrained(dir)` loads as it is, and back (docs/interop.md):
// config.json (interop/hf_config.h: GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM) and the weights under HF's names and layouts (interop/hf_names.h), in
// model.safetensors or, on import, the shards a model.safetensors.index.json lists.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_shards.h"
#include "collectives/communicator.h"
#include "core/dtype.h"
#include "interop/hf_config.h"
#include "interop/hf_names.h"
#include "models/gpt/gpt_config.h"
#include "runtime/engine.h"

namespace zs::nn {

// Writes DIR/config.json (hf_config_json) and the master weights under HF names and layouts of
// hf_family_of(c.arch), as `dtype` (fp32 or bf16; LoRA adapters merged), as save_pretrained
// writes them: DIR/model.safetensors when they fit in one file of `max_shard_bytes` data bytes
// (safetensors_shards.h), else DIR/model-00001-of-0000N.safetensors... and
// DIR/model.safetensors.index.json; creating DIR when missing, replacing another layout's files
// there atomically (safetensors::export_model). A mix of components no HF class maps is refused
// before anything is written. Collective.
safetensors::ExportReport export_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& c,
                                        const std::string& dir, DType dtype = DType::kF32,
                                        int64_t max_shard_bytes = safetensors::kDefaultShardBytes);

struct GptHfImport {
  HfConfig config;                   // what DIR/config.json says
  std::vector<std::string> ignored;  // tensors of the files skipped (hf_ignorable, or a stored
                                     // lm_head.weight that tie_word_embeddings overrides)
  int shards = 1;                    // safetensors files read (an index's shards)
};
// Reads DIR/config.json (rank 0, shared with every rank), checks it against `model` (the engine's
// model's config: check_hf_config), then sets the master weights from DIR/model.safetensors, or
// from the files DIR/model.safetensors.index.json's weight_map lists (F32, BF16 or F16), each
// tensor checked for shape and finite values, each rank reading only its shard's ranges, a unit at
// a time (a frozen base: the rows this rank stores; model.run.threads encode it). Tied
// embeddings (tie_word_embeddings, which the model must match) are one parameter: the input
// embedding, and a stored lm_head.weight is skipped. A tensor in no file is refused naming it.
// Errors as safetensors::import_model, thrown on every rank; nothing is changed unless all
// succeeded. Collective.
GptHfImport import_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& model,
                          const std::string& dir);
// DIR/config.json parsed (to size a model from it). Collective.
HfConfig read_gpt_hf_config(Communicator& comm, const std::string& dir);

}  // namespace zs::nn
