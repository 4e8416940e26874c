// The architecture flags of the trainer (zs_train) and zs_plan, declared once
// (issues 26, 27): the dimensions --layers, --heads, --width, --context, --vocab and the components
// --family gpt2|llama|qwen3 (a preset), --head-dim, --qk-norm, --norm, --norm-eps, --positions,
// --rope-theta, --rope-scaling,
// --mlp, --ffn, --kv-heads, --qkv-bias, --proj-bias, --mlp-bias ([Note: architecture components]
// in nn/gpt_architecture.h), each with one help text, mapped onto nn::GptArchitecture (the trainer)
// or nn::TransformerShape (zs_plan), so that the same flags describe the same model in both.
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include "models/gpt/gpt_architecture.h"

namespace zs::apps {

// The model of both programs when no model flag is given: zs_train's byte-level GPT (4 layers,
// width 128, 4 heads, context 128, vocabulary 256: the bytes; GPT-2's components).
const nn::GptArchitecture& default_architecture();

// Declares the architecture flags on `desc`: the dimensions (--vocab only with `with_vocab`), then
// --ffn, --family and the component flags. With `defaults` each dimension takes and shows its
// value there (the trainer: `--layers arg (=4)`) and --family shows gpt2; without, a flag not
// given is absent from the variables_map and leaves the value it would set as it is (zs_plan:
// --model's or the shape's). The component flags never take a default: absent, the family's.
void add_architecture_options(boost::program_options::options_description& desc,
                              const nn::GptArchitecture* defaults, bool with_vocab);

// True when an architecture flag (a dimension, --ffn, --family or a component) was given on the
// command line or in a config file, not only defaulted.
bool architecture_options_given(const boost::program_options::variables_map& vm);

// True when --family or a component flag (--norm ... --mlp-bias, --kv-heads, --ffn) was given.
bool component_options_given(const boost::program_options::variables_map& vm);

// Sets `field` to flag `name`'s value when vm holds one (given or defaulted).
void apply_architecture_option(const boost::program_options::variables_map& vm,
                               const std::string& name, int& field);

// `arch` (an nn::GptArchitecture or an nn::TransformerShape) with every dimension flag vm holds
// applied (not the components: apply_component_options). Not validated.
template <typename Architecture>
void apply_architecture_options(const boost::program_options::variables_map& vm,
                                Architecture& arch) {
  apply_architecture_option(vm, "layers", arch.layers);
  apply_architecture_option(vm, "heads", arch.heads);
  apply_architecture_option(vm, "width", arch.width);
  apply_architecture_option(vm, "context", arch.context);
  apply_architecture_option(vm, "vocab", arch.vocab);
}

// --family's preset (when vm holds it: norm, positions, MLP, biases and q/k norms of GPT-2, Llama
// or Qwen3; "gpt" is gpt2's other spelling), then each component flag vm holds, over `arch`. Throws
// zs::Error(kInvalidArgument) naming the flag and its value for a value outside its choices.
void apply_component_options(const boost::program_options::variables_map& vm,
                             nn::GptArchitecture& arch);

// Checks `arch` as the flags gave it, naming the flags: --kv-heads must divide --heads, rotary
// positions need an even head dim (--width / --heads), --ffn, --norm-eps and --rope-theta in
// range, and --rope-theta and --rope-scaling only with rotary positions (--rope-scaling's value is
// checked by apply_component_options). The rest is the model's to check
// (GptArchitecture::validate, TransformerShape::validate). Throws zs::Error(kInvalidArgument).
void check_architecture(const boost::program_options::variables_map& vm,
                        const nn::GptArchitecture& arch);

// `base` with the dimension and component flags in vm applied and checked by check_architecture
// (the trainer: its defaults, then the flags).
nn::GptArchitecture architecture_from_options(const boost::program_options::variables_map& vm,
                                              nn::GptArchitecture base);

}  // namespace zs::apps
