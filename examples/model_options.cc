#include "examples/model_options.h"

#include <span>

namespace po = boost::program_options;

namespace zs::examples {
namespace {

struct ArchitectureFlag {
  const char* name;
  const char* help;
  int nn::GptArchitecture::*field;  // where train_gpt's default comes from
};

// In --help's order (train_gpt's log header lists its options in that order too).
constexpr ArchitectureFlag kFlags[] = {
    {"layers", "transformer blocks", &nn::GptArchitecture::layers},
    {"heads", "attention heads", &nn::GptArchitecture::heads},
    {"width", "model width (divisible by heads)", &nn::GptArchitecture::width},
    {"context", "sequence length", &nn::GptArchitecture::context},
    {"vocab", "vocabulary size", &nn::GptArchitecture::vocab},
};

std::span<const ArchitectureFlag> flags(bool with_vocab) {
  return std::span(kFlags).first(with_vocab ? std::size(kFlags) : std::size(kFlags) - 1);
}

}  // namespace

void add_architecture_options(po::options_description& desc, const nn::GptArchitecture* defaults,
                              bool with_vocab) {
  for (const ArchitectureFlag& f : flags(with_vocab)) {
    po::typed_value<int>* v = po::value<int>();
    if (defaults != nullptr) v->default_value(defaults->*f.field);
    desc.add_options()(f.name, v, f.help);
  }
}

bool architecture_options_given(const po::variables_map& vm) {
  for (const ArchitectureFlag& f : kFlags)
    if (vm.count(f.name) && !vm[f.name].defaulted()) return true;
  return false;
}

void apply_architecture_option(const po::variables_map& vm, const std::string& name, int& field) {
  if (vm.count(name)) field = vm[name].as<int>();
}

nn::GptArchitecture architecture_from_options(const po::variables_map& vm,
                                              nn::GptArchitecture base) {
  apply_architecture_options(vm, base);
  return base;
}

}  // namespace zs::examples
