// Files of a LoRA-adapted GPT ([Note: LoRA] in models/gpt/gpt_adapters.h): the merged model, and
// the adapters alone in the layout Hugging Face PEFT loads (docs/finetune.md).
//
// Merged: each adapted weight W [out, in] is written as W + (alpha / rank) * B A, computed in fp32
// from the fp32 master of A and B and the stored base (int8 bases dequantized); the adapters
// themselves are left out, so the file is the base model's (ours or Hugging Face's layout). An
// adapter of part of a fused linear (q_proj of qkv, gate_proj of fc) merges into its rows.
// PEFT: DIR/adapter_model.safetensors holds, for a GPT-2 architecture (every component GPT-2's),
//   base_model.model.transformer.h.<l>.<module>.lora_A.weight  [rank, in]
//   base_model.model.transformer.h.<l>.<module>.lora_B.weight  [out, rank]
// with <module> attn.c_attn (qkv), attn.c_proj (proj), mlp.c_fc (fc), mlp.c_proj (fc_proj),
// fan_in_fan_out = true (GPT-2's Conv1D stores weights [in, out]); for any other architecture
// (Llama, Mistral, Qwen2: nn.Linear modules)
//   base_model.model.model.layers.<l>.<module>.lora_A.weight / lora_B.weight
// with <module> self_attn.q_proj / k_proj / v_proj, self_attn.o_proj (proj), mlp.gate_proj /
// up_proj, mlp.down_proj (fc_proj), fan_in_fan_out = false; the fused qkv and fc have no such
// module and are refused. DIR/adapter_config.json is a LoraConfig (peft_type LORA, task_type
// CAUSAL_LM, r, lora_alpha, target_modules). Load it over the base exported with --export-hf:
// PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), DIR).
#pragma once

#include <string>

#include "checkpoint/safetensors.h"
#include "collectives/communicator.h"
#include "core/dtype.h"
#include "models/gpt/gpt_adapters.h"
#include "models/gpt/gpt_config.h"
#include "runtime/engine.h"

namespace zs::nn {

// True for an adapter parameter ("<target>.lora_A" or "<target>.lora_B").
bool is_lora_param(const ParamSpec& p);

// Makes an export of `model` (its adapters) write the merged model (merged on model.run.threads
// OpenMP threads; the bits do not depend on it); nothing without adapters.
void merge_lora_on_export(const GptConfig& model, safetensors::ExportOptions& o);
// Makes the adapters optional on import (a base file has none; they keep their initial values).
void lora_optional_on_import(const GptLoraConfig& lora, safetensors::ImportOptions& o);

// PEFT's module of target `t` in `arch` ("attn.c_attn", "self_attn.q_proj", ...). Throws
// zs::Error(kInvalidArgument) naming the target when the architecture's Hugging Face form has no
// such module (q_proj of a GPT-2, the fused qkv of a Llama).
std::string peft_module(GptLoraTarget t, const GptArchitecture& arch);
// Writes DIR/adapter_model.safetensors (in `dtype`, fp32 or bf16) and DIR/adapter_config.json.
// `model` is the engine's model's config. Collective. Throws zs::Error(kInvalidArgument) when the
// model has no adapters or a target has no PEFT module (peft_module()), before writing anything.
void export_gpt_peft_adapters(Engine& engine, Communicator& comm, const GptConfig& model,
                              const std::string& dir, DType dtype);

}  // namespace zs::nn
