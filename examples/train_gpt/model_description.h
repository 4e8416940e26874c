// The model description the trainer stores in each checkpoint's manifest and compares on resume
// (checkpoint/checkpoint.h: model_description, expect_model_description): the architecture with
// every component, and for a fine-tune the adapters and the base's storage, under their flags'
// names, so that a resume with another architecture is refused naming the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "options.h"

namespace zs::train {

// The architecture's fields: layers, heads, width, context, vocab, ffn_mult (the dimensions, as
// checkpoints before issue 27 hold them) and the components norm, norm_eps, positions, rope_theta,
// mlp, ffn (elements), kv_heads (0: heads), qkv_bias, proj_bias, mlp_bias.
nlohmann::json architecture_json(const nn::GptArchitecture& arch);

// The description of `o`'s model (JSON text): {"model": "gpt", architecture_json(...)} and, with
// LoRA adapters, lora-rank, lora-alpha, lora-targets and base-dtype.
std::string model_description(const TrainOptions& o);

// What to expect of a checkpoint whose stored description is `saved` (JSON text): `current` (this
// run's model_description()) as it is; for a checkpoint written before the components were stored
// (no "norm" key: a GPT-2), `current` without each component field whose value is GPT-2's, so that
// such a checkpoint resumes as GPT-2 and a run of another architecture is refused naming the first
// component that differs.
std::string description_to_expect(const std::string& saved, const std::string& current);

}  // namespace zs::train
