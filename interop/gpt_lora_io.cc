#include "interop/gpt_lora_io.h"

#include <algorithm>
#include <filesystem>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <omp.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zs::nn {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool gpt2_names(const GptArchitecture& arch) { return arch.family() == "gpt-2"; }

// The module of the adapter parameter named "<target>.lora_A" or "<target>.lora_B" (`target`).
std::string peft_module(const std::string& target, const GptArchitecture& arch) {
  const std::optional<GptLoraTarget> t = gpt_lora_target_from_name(target);
  ZS_CHECK(t.has_value(), ErrorCode::kInvalidArgument, "no PEFT module for LoRA target '{}'",
           target);
  return peft_module(*t, arch);
}

// Row offset and rows of `target`'s part of its base weight "<base>.weight".
struct MergeSite {
  std::string adapter, weight;
  int64_t row0 = 0;
};

// y rows [row0, row0 + out) of W [.., in] += s B A (B [out, r], A [r, in]), in fp32, rows split
// between up to `threads` OpenMP threads (0: the OpenMP default) that compute under the caller's
// MXCSR: each row's arithmetic is the same whatever the thread count, so are the bits.
void merge_rows(float s, int64_t r, const std::vector<float>& a, const std::vector<float>& b,
                int64_t row0, std::vector<float>& w, int threads) {
  const int64_t in = static_cast<int64_t>(a.size()) / r, out = static_cast<int64_t>(b.size()) / r;
  ZS_CHECK(static_cast<int64_t>(w.size()) >= (row0 + out) * in, ErrorCode::kInternal,
           "LoRA merge: the weight has {} elements, the adapter writes rows {}..{} of {}", w.size(),
           row0, row0 + out, in);
  if (threads <= 0) threads = omp_get_max_threads();
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, out / 16)));
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
#endif
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
#endif
    std::vector<float> row(static_cast<size_t>(in));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < out; ++i) {
      std::fill(row.begin(), row.end(), 0.0f);
      for (int64_t k = 0; k < r; ++k) {
        const float bik = b[static_cast<size_t>(i * r + k)];
        const float* ak = a.data() + k * in;
        for (int64_t j = 0; j < in; ++j) row[static_cast<size_t>(j)] += bik * ak[j];
      }
      float* wi = w.data() + (row0 + i) * in;
      for (int64_t j = 0; j < in; ++j) wi[j] += s * row[static_cast<size_t>(j)];
    }
#if defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  }
}

}  // namespace

std::string peft_module(GptLoraTarget t, const GptArchitecture& arch) {
  const bool gpt2 = gpt2_names(arch);
  switch (t) {
    case GptLoraTarget::kQkv:
      if (gpt2) return "attn.c_attn";
      break;
    case GptLoraTarget::kProj:
      return gpt2 ? "attn.c_proj" : "self_attn.o_proj";
    case GptLoraTarget::kFc:
      if (gpt2) return "mlp.c_fc";
      break;
    case GptLoraTarget::kFcProj:
      return gpt2 ? "mlp.c_proj" : "mlp.down_proj";
    case GptLoraTarget::kQ:
    case GptLoraTarget::kK:
    case GptLoraTarget::kV:
      if (!gpt2) return std::string("self_attn.") + gpt_lora_target_name(t);
      break;
    case GptLoraTarget::kGate:
    case GptLoraTarget::kUp:
      if (!gpt2) return std::string("mlp.") + gpt_lora_target_name(t);
      break;
  }
  fail(ErrorCode::kInvalidArgument,
       "LoRA target {} has no PEFT module in a {} model ({}: target {} instead)",
       gpt_lora_target_name(t), gpt2 ? "GPT-2" : "Llama-style",
       gpt2 ? "GPT-2 fuses q/k/v in attn.c_attn" : "Hugging Face's Llama has separate projections",
       gpt2 ? "qkv" : (t == GptLoraTarget::kQkv ? "q_proj,k_proj,v_proj" : "gate_proj,up_proj"));
}

bool is_lora_param(const ParamSpec& p) {
  return ends_with(p.name, ".lora_A") || ends_with(p.name, ".lora_B");
}

void merge_lora_on_export(const GptConfig& model, safetensors::ExportOptions& o) {
  const GptLoraConfig& lora = model.adapters.lora;
  if (!lora.enabled()) return;
  o.include = [](const std::string&, const ParamSpec& p) { return !is_lora_param(p); };
  std::vector<MergeSite> sites;
  for (GptLoraTarget t : lora.targets) {
    sites.push_back({gpt_lora_target_name(t),
                     std::string(gpt_lora_target_name(gpt_lora_base_linear(t))) + ".weight",
                     gpt_lora_row_offset(t, model.arch)});
  }
  const float s = lora.scaling();
  const int64_t r = lora.rank;
  const int threads = model.run.threads;
  o.transform_frozen = [s, r, sites, threads](const std::string&, const std::string& param,
                                              const safetensors::UnitValues& t,
                                              std::vector<float>& w) {
    for (const MergeSite& m : sites) {
      if (m.weight != param) continue;
      auto a = t.find(m.adapter + ".lora_A"), b = t.find(m.adapter + ".lora_B");
      if (a == t.end() || b == t.end()) continue;  // not a block
      merge_rows(s, r, a->second, b->second, m.row0, w, threads);
    }
  };
}

void lora_optional_on_import(const GptLoraConfig& lora, safetensors::ImportOptions& o) {
  if (!lora.enabled()) return;
  o.optional = [](const std::string&, const ParamSpec& p) { return is_lora_param(p); };
}

void export_gpt_peft_adapters(Engine& engine, Communicator& comm, const GptConfig& model,
                              const std::string& dir, DType dtype) {
  const GptLoraConfig& lora = model.adapters.lora;
  const GptArchitecture arch = model.arch;
  ZS_CHECK(lora.enabled(), ErrorCode::kInvalidArgument,
           "--export-adapters: the model has no LoRA adapters (--lora-rank 0)");
  std::vector<std::string> modules;
  for (GptLoraTarget t : lora.targets) modules.push_back(peft_module(t, arch));  // may refuse
  const bool gpt2 = gpt2_names(arch);
  const std::string prefix =
      gpt2 ? "base_model.model.transformer.h." : "base_model.model.model.layers.";
  safetensors::ExportOptions o;
  o.dtype = dtype;
  o.include = [](const std::string&, const ParamSpec& p) { return is_lora_param(p); };
  o.namer = [arch, prefix](const std::string& unit, const ParamSpec& p) -> safetensors::TensorName {
    if (!is_lora_param(p) || unit.rfind("block.", 0) != 0) return {unit + "." + p.name, false};
    const std::string layer = unit.substr(6);
    const size_t dot = p.name.rfind('.');
    const std::string target = p.name.substr(0, dot), ab = p.name.substr(dot + 1);
    return {prefix + layer + "." + peft_module(target, arch) + "." + ab + ".weight", false};
  };
  nlohmann::ordered_json cfg;
  cfg["peft_type"] = "LORA";
  cfg["task_type"] = "CAUSAL_LM";
  cfg["base_model_name_or_path"] = nullptr;
  cfg["r"] = lora.rank;
  cfg["lora_alpha"] = lora.alpha;
  cfg["lora_dropout"] = 0.0;
  cfg["target_modules"] = modules;
  cfg["fan_in_fan_out"] = gpt2;  // GPT-2's Conv1D stores [in, out]; nn.Linear [out, in]
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
