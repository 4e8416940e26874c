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
// mlp, ffn (elements), kv_heads (0: heads), qkv_bias, proj_bias, mlp_bias. (model_description
// adds tied_embeddings, rope_scaling (the --rope-scaling text), head_dim and qk_norm when set.)
nlohmann::json architecture_json(const nn::GptArchitecture& arch);

// The description of `o`'s model (JSON text): {"model": "gpt", architecture_json(...)} and, with
// LoRA adapters, lora-rank, lora-alpha, lora-targets and base-dtype.
std::string model_description(const TrainOptions& o);

// What to expect of a checkpoint whose stored description is `saved` (JSON text): `current` (this
// run's model_description()) as it is; for a checkpoint written before the components were stored
// (no "norm" key: a GPT-2), `current` without each component field whose value is GPT-2's, so that
// such a checkpoint resumes as GPT-2 and a run of another architecture is refused naming the first
// component that differs.
// The architecture a description (architecture_json()'s fields, as JSON text) holds; one written
// before the components were stored is a GPT-2. Throws zs::Error(kCorruptData) naming `where` for
// a description that is not one.
nn::GptArchitecture architecture_from_description(const std::string& text,
                                                  const std::string& where);

// A rotary model's description expects the checkpoint's context: nothing in its parameters
// depends on it (learned positions do: their table is context x width).
std::string description_to_expect(const std::string& saved, const std::string& current);

// Why a checkpoint whose stored description is `saved` is not this run's model `expected`
// (description_to_expect()'s result), in the user's terms: the family when the components say
// another one, else the flag first in --help's order whose value differs ("--width 128 in this
// run, 64 in the checkpoint"), then the fields that follow from it; LoRA adapters present on one
// side only are named as such. Empty when they agree.
std::string describe_model_change(const std::string& saved, const std::string& expected);

}  // namespace zs::train
