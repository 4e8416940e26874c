#include "hf_architecture.h"

#include <algorithm>
#include <filesystem>

#include "apps/common/model_options.h"
#include "checkpoint/checkpoint_io.h"
#include "core/error.h"
#include "interop/gpt_lora_io.h"
#include "interop/hf_config.h"
#include "paths.h"

namespace zs::train {

namespace po = boost::program_options;

nn::GptArchitecture architecture_from_hf(const po::variables_map& vm, const std::string& dir) {
  check_path("init-from-hf", dir, PathUse::kReadDir);  // its own message first (paths.h)
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const nn::HfConfig hf = nn::parse_hf_config(ckpt::read_whole_file(path, int64_t{1} << 20), path);
  nn::GptArchitecture arch = hf.arch;
  if (arch.positions == nn::PositionKind::kRotary && vm.count("context"))
    arch.context = std::min(vm["context"].as<int>(), hf.max_positions);
  // The flags the user set, without the defaults: each overrides config.json's value, and
  // check_hf_config refuses any that disagrees.
  po::variables_map given;
  for (const auto& [name, value] : vm) {
    if (!value.defaulted()) given.insert({name, value});
  }
  arch = apps::architecture_from_options(given, arch);
  nn::check_hf_config(hf, arch, path);
  return arch;
}

void check_hf_export(const nn::GptArchitecture& arch, const std::string& dir) {
  try {
    nn::hf_family_of(arch);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "--export-hf {}: {}", dir, e.what());
  }
}

void check_peft_export(const nn::GptConfig& model, const std::string& dir) {
  if (!model.adapters.lora.enabled()) return;
  try {
    for (nn::GptLoraTarget t : model.adapters.lora.targets) nn::peft_module(t, model.arch);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "--export-adapters {}: {}", dir, e.what());
  }
}

}  // namespace zs::train
