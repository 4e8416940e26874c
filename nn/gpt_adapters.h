// What is added to a GPT's architecture (nn/gpt_architecture.h) for fine-tuning: low-rank adapters
// on chosen linears and computing from an int8 frozen base. Names of the adapted linears are
// strings only at the edges (flags, checkpoint manifests, PEFT files): parse_gpt_lora_targets() and
// gpt_lora_target_names() convert.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "nn/gpt_architecture.h"

namespace zs::nn {

// The linears of a block that LoRA can adapt, in the order their adapters follow the block's base
// parameters (nn/gpt_specs.h); kGptLoraTargetNames spells them at the edges.
enum class GptLoraTarget : uint8_t { kQkv, kProj, kFc, kFcProj };
constexpr int kNumGptLoraTargets = 4;
constexpr const char* kGptLoraTargetNames[kNumGptLoraTargets] = {"qkv", "proj", "fc", "fc_proj"};

// "qkv", "proj", "fc" or "fc_proj".
const char* gpt_lora_target_name(GptLoraTarget t);
// The target spelled `name`; nullopt for any other string.
std::optional<GptLoraTarget> gpt_lora_target_from_name(std::string_view name);
// The targets named by `names`, in their order. Throws zs::Error(kInvalidArgument)
// "gpt config: lora target \"x\" is not one of qkv, proj, fc, fc_proj" for an unknown name and
// "gpt config: lora target \"x\" is given twice" for a repeated one.
std::vector<GptLoraTarget> gpt_lora_targets_from_names(std::span<const std::string> names);
// A comma-separated list ("qkv,fc", as --lora-targets takes it) parsed as
// gpt_lora_targets_from_names(); an empty item is an unknown name.
std::vector<GptLoraTarget> parse_gpt_lora_targets(std::string_view list);
// The names of `targets`, in their order (the inverse of gpt_lora_targets_from_names()).
std::vector<std::string> gpt_lora_target_names(std::span<const GptLoraTarget> targets);
// "qkv,fc": the names joined by commas (the inverse of parse_gpt_lora_targets()).
std::string format_gpt_lora_targets(std::span<const GptLoraTarget> targets);
// "qkv, proj, fc, fc_proj": every target, for messages.
std::string gpt_lora_allowed_targets();

// [Note: LoRA] Low-rank adapters (Hu et al. 2021, as Hugging Face PEFT's LoraConfig): each
// targeted linear y = x W^T + b of every block becomes y = x W^T + b + (alpha / rank) (x A^T) B^T
// with A [rank, in] (PEFT's kaiming_uniform(a = sqrt(5)): uniform(-1/sqrt(in), 1/sqrt(in))) and
// B [out, rank] (zeros), so an adapted model starts as its base. The adapters are parameters
// "<target>.lora_A" and "<target>.lora_B" appended after the block's base parameters; the base
// parameters keep their order and indices (checkpoints and Hugging Face interop of the base do not
// move). With freeze_base every base parameter (embeddings, layer norms, weights, biases, head) is
// frozen (ParamSpec::trainable = false, [Note: frozen parameters] in unit/unit.h) and only the
// adapters train. CPU model only: nn::CudaGptModel refuses a config with adapters
// (check_gpt_lora_device).
struct GptLoraConfig {
  int rank = 0;        // r in [0, 4096]; 0: no adapters (every other field is then unused)
  float alpha = 8.0f;  // PEFT's lora_alpha (default 8); finite and > 0
  // The adapted linears, no repeats, in the order given (manifests and PEFT files list them so).
  std::vector<GptLoraTarget> targets = {GptLoraTarget::kQkv, GptLoraTarget::kProj,
                                        GptLoraTarget::kFc, GptLoraTarget::kFcProj};
  bool freeze_base = true;  // the base parameters are frozen; false: base and adapters train

  bool enabled() const { return rank > 0; }
  float scaling() const { return alpha / static_cast<float>(rank); }  // s = alpha / r
  // Bit t set when GptLoraTarget t is adapted; 0 without adapters.
  uint32_t target_mask() const;
  bool targets_linear(GptLoraTarget t) const { return (target_mask() >> static_cast<int>(t)) & 1u; }
  // Throws zs::Error(kInvalidArgument) "gpt config: lora ..." naming the first bad field.
  void validate() const;
};

// [Note: int8 base compute] With `accept`, the four base linear weights of each block (qkv, proj,
// fc, fc_proj) declare ParamSpec::accepts_int8: on an int8 frozen base whose records the engine
// hands over raw (EngineConfig::frozen.int8_compute, [Note: int8 compute] in
// runtime/engine_config.h) the block computes from them with nn::Int8Linear (nn/int8_linear.h):
// forward through the int8 GEMM with LLM.int8()'s outlier decomposition at outlier_threshold
// (0 = off), backward-data on the dequantized weight (measured in docs/finetune.md). Views in the
// compute dtype (any other storage or int8_compute) take nn::Linear as before. The model then
// keeps one Int8Linear per shape and their workspace (GptCpuBytes::int8_ws). CPU only.
struct GptInt8Config {
  bool accept = false;
  float outlier_threshold = 6.0f;  // LLM.int8()'s default
};

// The adapters of a model: LoRA ([Note: LoRA]) and int8 compute ([Note: int8 base compute]), both
// off by default.
struct GptAdapters {
  GptLoraConfig lora;
  GptInt8Config int8;

  // Throws zs::Error(kInvalidArgument) "gpt config: ..." naming the first bad field.
  void validate() const;
  // Adapter elements of one block of `arch` (0 without adapters).
  int64_t num_lora_params_per_block(const GptArchitecture& arch) const;
};

// (in, out) of the linear GptLoraTarget `t` adapts in a block of `arch`: qkv (C, qkv_rows()),
// proj (C, C), fc (C, fc_rows()), fc_proj (F, C).
void gpt_lora_linear_shape(GptLoraTarget t, const GptArchitecture& arch, int64_t* in, int64_t* out);

// Throws zs::Error(kUnsupported) "... LoRA adapters are implemented on the CPU backend only" when
// a model with adapters (lora_rank > 0) is asked for on a device other than the CPU.
void check_gpt_lora_device(int64_t lora_rank, DeviceKind device);

}  // namespace zs::nn
