// The parameters of the GPT units, shared by the CPU model (nn::GptModel) and the GPU model
// (nn::CudaGptModel): names, shapes, order, initialisers and weight-decay flags are declared here
// once, so checkpoints, param_hash and safetensors exports are interchangeable between the two.
// See nn/gpt_model_base.h for the units and the GPT-2 initialisation.
#pragma once

#include <string>
#include <vector>

#include "nn/gpt_config.h"
#include "unit/unit.h"

namespace zs::nn {

// Parameter order of a block (index into gpt_block_specs()).
enum GptBlockParam {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB,
  kNumBlockParams
};

// Every base parameter below (embeddings, blocks' first kNumBlockParams, head) has
// trainable = !(c.adapters.lora.enabled() && c.adapters.lora.freeze_base) ([Note: LoRA] in
// nn/gpt_adapters.h).

// Unit 0 "embed": wte [vocab, width], wpe [context, width].
std::vector<ParamSpec> gpt_embed_specs(const GptConfig& c);
// Units 1..layers "block.i": the kNumBlockParams parameters above, in that order; then, with LoRA
// adapters, for each targeted linear in GptLoraTarget order (qkv, proj, fc, fc_proj)
// "<target>.lora_A" [rank, in] (uniform(-1/sqrt(in), 1/sqrt(in))) and "<target>.lora_B"
// [out, rank] (zeros), both trainable and weight-decayed (PEFT leaves them to the optimizer's
// weight decay).
std::vector<ParamSpec> gpt_block_specs(const GptConfig& c);
// The index in gpt_block_specs(c) of "<t>.lora_A" (its lora_B follows at + 1), or -1 when `t` is
// not adapted.
int gpt_lora_param_index(const GptConfig& c, GptLoraTarget t);
// Unit layers + 1 "head": ln_f.weight, ln_f.bias, lm_head.weight.
std::vector<ParamSpec> gpt_head_specs(const GptConfig& c);
// "embed", "block.<l>" or "head" for unit `unit` of a model with c.arch.layers blocks.
std::string gpt_unit_name(const GptConfig& c, size_t unit);
// The parameters of unit `unit` (0..layers + 1): one of the three lists above.
std::vector<ParamSpec> gpt_unit_specs(const GptConfig& c, size_t unit);

}  // namespace zs::nn
