// Files of a LoRA-adapted GPT ([Note: LoRA] in nn/gpt_adapters.h): the merged model, and the
// adapters alone in the layout Hugging Face PEFT loads (docs/finetune.md).
//
// Merged: each adapted weight W [out, in] is written as W + (alpha / rank) * B A, computed in fp32
// from the fp32 master of A and B and the stored base (int8 bases dequantized); the adapters
// themselves are left out, so the file is the base model's (ours or GPT-2's layout).
// PEFT: DIR/adapter_model.safetensors holds
//   base_model.model.transformer.h.<l>.<module>.lora_A.weight  [rank, in]
//   base_model.model.transformer.h.<l>.<module>.lora_B.weight  [out, rank]
// with <module> attn.c_attn (qkv), attn.c_proj (proj), mlp.c_fc (fc), mlp.c_proj (fc_proj), and
// DIR/adapter_config.json a LoraConfig (peft_type LORA, task_type CAUSAL_LM, r, lora_alpha,
// target_modules, fan_in_fan_out = true: GPT-2's Conv1D stores weights [in, out]). Load it over
// the base exported with --export-hf: PeftModel.from_pretrained(GPT2LMHeadModel..., DIR).
#pragma once

#include <string>

#include "checkpoint/safetensors.h"
#include "collectives/communicator.h"
#include "core/dtype.h"
#include "nn/gpt_adapters.h"
#include "runtime/engine.h"

namespace zs::nn {

// True for an adapter parameter ("<target>.lora_A" or "<target>.lora_B").
bool is_lora_param(const ParamSpec& p);

// Makes an export of a model with adapters `lora` write the merged model; nothing without
// adapters.
void merge_lora_on_export(const GptLoraConfig& lora, safetensors::ExportOptions& o);
// Makes the adapters optional on import (a base file has none; they keep their initial values).
void lora_optional_on_import(const GptLoraConfig& lora, safetensors::ImportOptions& o);

// Writes DIR/adapter_model.safetensors (in `dtype`, fp32 or bf16) and DIR/adapter_config.json.
// `lora` is the engine's model's. Collective. Throws zs::Error(kInvalidArgument) when the model
// has no adapters.
void export_gpt_peft_adapters(Engine& engine, Communicator& comm, const GptLoraConfig& lora,
                              const std::string& dir, DType dtype);

}  // namespace zs::nn
