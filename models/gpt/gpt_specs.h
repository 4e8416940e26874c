// The parameters of the GPT units, shared by the CPU model (nn::GptModel) and the GPU model
// (nn::CudaGptModel): names, shapes, order, initialisers and weight-decay flags are declared here
// once, so checkpoints, param_hash and safetensors exports are interchangeable between the two.
// See models/gpt/gpt_model_base.h for the units and the GPT-2 initialisation.
#pragma once

#include <string>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "unit/unit.h"

namespace zs::nn {

// Where each parameter of a block sits in gpt_block_specs(): an index, or -1 for a parameter the
// architecture does not have ([Note: architecture components] in models/gpt/gpt_architecture.h: no
// norm biases with RMSNorm, biases per projection, q/k norms with qk_norm only). The order is
// always ln1.weight, ln1.bias, qkv.weight, qkv.bias, q_norm.weight, k_norm.weight, proj.weight,
// proj.bias, ln2.weight, ln2.bias, fc.weight, fc.bias, fc_proj.weight, fc_proj.bias, with the
// absent ones left out, so a GPT-2 block keeps its twelve indices.
struct GptBlockLayout {
  int ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, q_norm_w = -1, k_norm_w = -1;
  int proj_w = -1, proj_b = -1;
  int ln2_w = -1, ln2_b = -1, fc_w = -1, fc_b = -1, fc_proj_w = -1, fc_proj_b = -1;
  int count = 0;  // base parameters of a block; the LoRA adapters follow

  static GptBlockLayout of(const GptArchitecture& arch);
  // The weight / bias index of the base linear `t` adapts (qkv, proj, fc, fc_proj;
  // gpt_lora_base_linear()).
  int weight(GptLoraTarget t) const;
  int bias(GptLoraTarget t) const;
};

// Where each parameter of the head unit sits: ln_f.weight, ln_f.bias (LayerNorm only),
// lm_head.weight. The embed unit is wte, then wpe with learned positions.
struct GptHeadLayout {
  int ln_w = 0, ln_b = -1, lm_head = 1;
  static GptHeadLayout of(const GptArchitecture& arch);
};

// Every base parameter below (embeddings, blocks' first GptBlockLayout::count, head) has
// trainable = !(c.adapters.lora.enabled() && c.adapters.lora.freeze_base) ([Note: LoRA] in
// models/gpt/gpt_adapters.h).

// Unit 0 "embed": wte [vocab, width], and wpe [context, width] with learned positions.
std::vector<ParamSpec> gpt_embed_specs(const GptConfig& c);
// Units 1..layers "block.i": the GptBlockLayout parameters above, in that order; then, with LoRA
// adapters, for each targeted linear in GptLoraTarget order (qkv, proj, fc, fc_proj)
// "<target>.lora_A" [rank, in] (uniform(-1/sqrt(in), 1/sqrt(in))) and "<target>.lora_B"
// [out, rank] (zeros), both trainable and weight-decayed (PEFT leaves them to the optimizer's
// weight decay).
std::vector<ParamSpec> gpt_block_specs(const GptConfig& c);
// The index in gpt_block_specs(c) of "<t>.lora_A" (its lora_B follows at + 1), or -1 when `t` is
// not adapted.
int gpt_lora_param_index(const GptConfig& c, GptLoraTarget t);
// Unit layers + 1 "head": ln_f.weight, ln_f.bias (LayerNorm only), lm_head.weight.
std::vector<ParamSpec> gpt_head_specs(const GptConfig& c);
// "embed", "block.<l>" or "head" for unit `unit` of a model with c.arch.layers blocks.
std::string gpt_unit_name(const GptConfig& c, size_t unit);
// The parameters of unit `unit` (0..layers + 1): one of the three lists above.
std::vector<ParamSpec> gpt_unit_specs(const GptConfig& c, size_t unit);

}  // namespace zs::nn
