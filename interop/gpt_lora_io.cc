#include "interop/gpt_lora_io.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zs::nn {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2's module of each target, as PEFT names it.
const char* peft_module(GptLoraTarget target) {
  switch (target) {
    case GptLoraTarget::kQkv:
      return "attn.c_attn";
    case GptLoraTarget::kProj:
      return "attn.c_proj";
    case GptLoraTarget::kFc:
      return "mlp.c_fc";
    case GptLoraTarget::kFcProj:
      return "mlp.c_proj";
  }
  ZS_ASSERT(false);
}

// The module of the adapter parameter named "<target>.lora_A" or "<target>.lora_B" (`target`).
const char* peft_module(const std::string& target) {
  const std::optional<GptLoraTarget> t = gpt_lora_target_from_name(target);
  ZS_CHECK(t.has_value(), ErrorCode::kInvalidArgument, "no GPT-2 module for LoRA target '{}'",
           target);
  return peft_module(*t);
}

}  // namespace

bool is_lora_param(const ParamSpec& p) {
  return ends_with(p.name, ".lora_A") || ends_with(p.name, ".lora_B");
}

void merge_lora_on_export(const GptLoraConfig& lora, safetensors::ExportOptions& o) {
  if (!lora.enabled()) return;
  o.include = [](const std::string&, const ParamSpec& p) { return !is_lora_param(p); };
  const float s = lora.scaling();
  const int64_t r = lora.rank;
  const std::vector<std::string> targets = gpt_lora_target_names(lora.targets);
  o.transform = [s, r, targets](const std::string&, safetensors::UnitValues& v) {
    for (const std::string& t : targets) {
      auto a = v.find(t + ".lora_A"), b = v.find(t + ".lora_B"), w = v.find(t + ".weight");
      if (a == v.end() || b == v.end() || w == v.end()) continue;  // not a block
      const int64_t in = static_cast<int64_t>(a->second.size()) / r;
      const int64_t out = static_cast<int64_t>(b->second.size()) / r;
      ZS_CHECK(static_cast<int64_t>(w->second.size()) == out * in, ErrorCode::kInternal,
               "LoRA merge: {}.weight has {} elements, adapters say {} x {}", t, w->second.size(),
               out, in);
      std::vector<float> row(static_cast<size_t>(in));
      for (int64_t i = 0; i < out; ++i) {
        std::fill(row.begin(), row.end(), 0.0f);
        for (int64_t k = 0; k < r; ++k) {
          const float bik = b->second[static_cast<size_t>(i * r + k)];
          const float* ak = a->second.data() + k * in;
          for (int64_t j = 0; j < in; ++j) row[static_cast<size_t>(j)] += bik * ak[j];
        }
        float* wi = w->second.data() + i * in;
        for (int64_t j = 0; j < in; ++j) wi[j] += s * row[static_cast<size_t>(j)];
      }
    }
  };
}

void lora_optional_on_import(const GptLoraConfig& lora, safetensors::ImportOptions& o) {
  if (!lora.enabled()) return;
  o.optional = [](const std::string&, const ParamSpec& p) { return is_lora_param(p); };
}

void export_gpt_peft_adapters(Engine& engine, Communicator& comm, const GptLoraConfig& lora,
                              const std::string& dir, DType dtype) {
  ZS_CHECK(lora.enabled(), ErrorCode::kInvalidArgument,
           "--export-adapters: the model has no LoRA adapters (--lora-rank 0)");
  safetensors::ExportOptions o;
  o.dtype = dtype;
  o.include = [](const std::string&, const ParamSpec& p) { return is_lora_param(p); };
  o.namer = [](const std::string& unit, const ParamSpec& p) -> safetensors::TensorName {
    if (!is_lora_param(p) || unit.rfind("block.", 0) != 0) return {unit + "." + p.name, false};
    const std::string layer = unit.substr(6);
    const size_t dot = p.name.rfind('.');
    const std::string target = p.name.substr(0, dot), ab = p.name.substr(dot + 1);
    return {"base_model.model.transformer.h." + layer + "." + peft_module(target) + "." + ab +
                ".weight",
            false};
  };
  nlohmann::ordered_json cfg;
  std::vector<std::string> modules;
  for (GptLoraTarget t : lora.targets) modules.push_back(peft_module(t));
  cfg["peft_type"] = "LORA";
  cfg["task_type"] = "CAUSAL_LM";
  cfg["base_model_name_or_path"] = nullptr;
  cfg["r"] = lora.rank;
  cfg["lora_alpha"] = lora.alpha;
  cfg["lora_dropout"] = 0.0;
  cfg["target_modules"] = modules;
  cfg["fan_in_fan_out"] = true;
  cfg["bias"] = "none";
  cfg["modules_to_save"] = nullptr;
  cfg["inference_mode"] = true;
  cfg["init_lora_weights"] = true;
  o.side_files["adapter_config.json"] = cfg.dump(2) + "\n";
  o.create_directory = true;
  o.metadata["lora_rank"] = std::to_string(lora.rank);
  safetensors::export_model(engine, comm,
                            (std::filesystem::path(dir) / "adapter_model.safetensors").string(), o);
}

}  // namespace zs::nn
