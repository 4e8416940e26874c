#include "interop/gpt_hf.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "interop/gpt_lora_io.h"

namespace zs::nn {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kConfig = "config.json";

// The shard files an index's weight_map names, in first-mention order, as paths under `dir`.
std::vector<std::string> index_shards(const std::string& text, const std::string& dir,
                                      const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  ZS_CHECK(!j.is_discarded() && j.is_object() && j.contains("weight_map") &&
               j.at("weight_map").is_object() && !j.at("weight_map").empty(),
           ErrorCode::kInvalidArgument, "{}: not a safetensors index (no \"weight_map\" object)",
           where);
  std::vector<std::string> files;
  for (const auto& [tensor, file] : j.at("weight_map").items()) {
    ZS_CHECK(file.is_string() && !file.get<std::string>().empty() &&
                 file.get<std::string>().find('/') == std::string::npos,
             ErrorCode::kInvalidArgument,
             "{}: \"weight_map\" gives tensor \"{}\" the file {} (a file name in the directory "
             "expected)",
             where, tensor, file.dump());
    const std::string path = (fs::path(dir) / file.get<std::string>()).string();
    if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
  }
  return files;
}

// The safetensors files of DIR and the name errors give the set: model.safetensors when rank 0
// sees it, else the index's shards. Collective.
std::vector<std::string> weight_files(Communicator& comm, const std::string& dir,
                                      std::string& where) {
  double single = 0;
  if (comm.rank() == 0) single = fs::is_regular_file(fs::path(dir) / kWeights) ? 1 : 0;
  comm.broadcast(&single, 1, DType::kF64, 0);
  where = (fs::path(dir) / kWeights).string();
  if (single == 1) return {where};
  const std::string index = (fs::path(dir) / kIndex).string();
  std::string text;
  try {
    text = safetensors::read_side_file(comm, index, int64_t{64} << 20);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
    throw Error(e.code(), fmt::format("{}: neither {} nor {} is there (save the model with "
                                      "save_pretrained(dir, safe_serialization=True); "
                                      "pytorch_model.bin is not read)",
                                      dir, kWeights, kIndex));
  }
  where = index;
  return index_shards(text, dir, index);
}

}  // namespace

safetensors::ExportReport export_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& c,
                                        const std::string& dir, DType dtype,
                                        int64_t max_shard_bytes) {
  const HfFamily family = hf_family_of(c.arch);  // refuses a mix before anything is written
  safetensors::ExportOptions o;
  o.dtype = dtype;
  o.namer = [family, arch = c.arch](const std::string& unit, const ParamSpec& p) {
    // Adapters are merged into their weights, not written (interop/gpt_lora_io.h).
    if (is_lora_param(p)) return safetensors::default_tensor_name(unit, p);
    return hf_tensor_name(family, arch, unit, p, false);
  };
  merge_lora_on_export(c, o);
  o.side_files[kConfig] = hf_config_json(c.arch, dtype);
  o.create_directory = true;
  o.max_shard_bytes = max_shard_bytes;
  o.threads = c.run.threads;
  return safetensors::export_model(engine, comm, (fs::path(dir) / kWeights).string(), o);
}

HfConfig read_gpt_hf_config(Communicator& comm, const std::string& dir) {
  const std::string path = (fs::path(dir) / kConfig).string();
  return parse_hf_config(safetensors::read_side_file(comm, path), path);
}

GptHfImport import_gpt_hf(Engine& engine, Communicator& comm, const GptConfig& model,
                          const std::string& dir) {
  GptHfImport r;
  r.config = read_gpt_hf_config(comm, dir);
  check_hf_config(r.config, model.arch, (fs::path(dir) / kConfig).string());
  const bool tied = r.config.tied;
  const HfFamily family = r.config.family;
  safetensors::ImportOptions o;
  o.namer = [tied, family, arch = model.arch](const std::string& unit, const ParamSpec& p) {
    if (is_lora_param(p)) return safetensors::default_tensor_name(unit, p);
    return hf_tensor_name(family, arch, unit, p, tied);
  };
  lora_optional_on_import(model.adapters.lora, o);  // an HF directory has no adapters
  // Tied: HF's model uses the input embedding as its output matrix whatever lm_head.weight a file
  // holds, and so do we.
  o.ignorable = [tied, family](const std::string& name) {
    return hf_ignorable(family, name) || (tied && name == "lm_head.weight");
  };
  o.threads = model.run.threads;
  std::string where;
  const std::vector<std::string> files = weight_files(comm, dir, where);
  r.ignored = safetensors::import_model_files(engine, comm, files, where, o).ignored;
  r.shards = static_cast<int>(files.size());
  return r;
}

}  // namespace zs::nn
