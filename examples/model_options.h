// The architecture flags of train_gpt and zs_plan, declared once (issue 26): --layers, --heads,
// --width, --context and --vocab, each with one help text, mapped onto the fields of the
// same name in nn::GptArchitecture (train_gpt) or nn::TransformerShape (zs_plan, whose shapes are
// GPT or LLaMA), so that the same flags describe the same model in both programs.
#pragma once

#include <string>

#include <boost/program_options.hpp>

#include "nn/gpt_architecture.h"

namespace zs::examples {

// Declares the architecture flags on `desc` in the order above; --vocab only with `with_vocab`
// (both programs take it: train_gpt's default 256 is its bytes, token shards need more). With
// `defaults` each flag takes and shows its value there (train_gpt: `--layers arg (=4)`); without, a
// flag not given is absent from the variables_map and leaves the value it would set as it is
// (zs_plan: --model's or the shape's).
void add_architecture_options(boost::program_options::options_description& desc,
                              const nn::GptArchitecture* defaults, bool with_vocab);

// True when an architecture flag was given (on the command line or in a config file), not only
// defaulted.
bool architecture_options_given(const boost::program_options::variables_map& vm);

// Sets `field` to flag `name`'s value when vm holds one (given or defaulted).
void apply_architecture_option(const boost::program_options::variables_map& vm,
                               const std::string& name, int& field);

// `arch` (an nn::GptArchitecture or an nn::TransformerShape) with every architecture flag vm holds
// applied. Not validated: the model or the shape validates itself.
template <typename Architecture>
void apply_architecture_options(const boost::program_options::variables_map& vm,
                                Architecture& arch) {
  apply_architecture_option(vm, "layers", arch.layers);
  apply_architecture_option(vm, "heads", arch.heads);
  apply_architecture_option(vm, "width", arch.width);
  apply_architecture_option(vm, "context", arch.context);
  apply_architecture_option(vm, "vocab", arch.vocab);
}

// `base` with the architecture flags in vm applied (train_gpt: its defaults, then the flags).
nn::GptArchitecture architecture_from_options(const boost::program_options::variables_map& vm,
                                              nn::GptArchitecture base);

}  // namespace zs::examples
