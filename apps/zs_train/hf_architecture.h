// zs_train's model from a Hugging Face directory (--init-from-hf DIR, docs/interop.md): the
// architecture DIR/config.json describes, with the model flags the user gave checked against it;
// and the check that --export-hf can write the model.
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include "models/gpt/gpt_architecture.h"
#include "models/gpt/gpt_config.h"

namespace zs::train {

// The architecture of DIR/config.json (interop/hf_config.h), read by this process. A model flag
// given on the command line or in a config file (not one left at its default) must agree with it:
// zs::Error(kInvalidArgument) naming the config.json field and both values. A rotary model's
// context is --context (its default capped at max_position_embeddings).
nn::GptArchitecture architecture_from_hf(const boost::program_options::variables_map& vm,
                                         const std::string& dir);

// --export-hf DIR's class for `arch` (nn::hf_family_of), checked before any training: a mix of
// components no Hugging Face class maps is refused, zs::Error(kInvalidArgument) naming
// --export-hf and the component.
void check_hf_export(const nn::GptArchitecture& arch, const std::string& dir);

// --export-adapters DIR for `model`'s LoRA targets, checked before any training: a target the
// architecture's Hugging Face form has no PEFT module for (the fused qkv of a Llama, q_proj of a
// GPT-2; nn::peft_module) is refused, zs::Error(kInvalidArgument) naming --export-adapters and
// the target. Nothing without adapters (the export refuses that itself).
void check_peft_export(const nn::GptConfig& model, const std::string& dir);

}  // namespace zs::train
