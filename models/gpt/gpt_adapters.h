// What is added to a GPT's architecture (models/gpt/gpt_architecture.h) for fine-tuning: low-rank
// adapters on chosen linears and computing from an int8 frozen base. Names of the adapted linears
// are strings only at the edges (flags, checkpoint manifests, PEFT files): parse_gpt_lora_targets()
// and gpt_lora_target_names() convert.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "models/gpt/gpt_architecture.h"

namespace zs::nn {

// What LoRA can adapt in a block: one of the four fused linears whole (qkv, proj, fc, fc_proj,
// the first kNumGptLinears values, which also name the base linears themselves), or a part of a
// fused one as Hugging Face's Llama modules are (q_proj, k_proj, v_proj: row ranges of qkv;
// gate_proj, up_proj: row ranges of fc with SwiGLU). The adapters follow the block's base
// parameters in this order; kGptLoraTargetNames spells them in flags, manifests and messages.
// Hugging Face's other module names are aliases (gpt_lora_targets_from_names): o_proj = proj,
// down_proj = fc_proj, c_attn = qkv, c_fc = fc, c_proj = proj and fc_proj (GPT-2's attn.c_proj
// and mlp.c_proj, which PEFT's "c_proj" both match).
enum class GptLoraTarget : uint8_t { kQkv, kProj, kFc, kFcProj, kQ, kK, kV, kGate, kUp };
constexpr int kNumGptLinears = 4;
constexpr int kNumGptLoraTargets = 9;
constexpr const char* kGptLoraTargetNames[kNumGptLoraTargets] = {
    "qkv", "proj", "fc", "fc_proj", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"};

// "qkv", "proj", ..., "up_proj".
const char* gpt_lora_target_name(GptLoraTarget t);
// The target spelled `name` (canonical names only; aliases are gpt_lora_targets_from_names()'s);
// nullopt for any other string.
std::optional<GptLoraTarget> gpt_lora_target_from_name(std::string_view name);
// The targets named by `names` (canonical names and the aliases above), in their order. Throws
// zs::Error(kInvalidArgument) "gpt config: lora target \"x\" is not one of ..." for an unknown
// name and "gpt config: lora target \"x\" is given twice" for a repeated target.
std::vector<GptLoraTarget> gpt_lora_targets_from_names(std::span<const std::string> names);
// A comma-separated list ("qkv,fc", as --lora-targets takes it) parsed as
// gpt_lora_targets_from_names(); an empty item is an unknown name.
std::vector<GptLoraTarget> parse_gpt_lora_targets(std::string_view list);
// The canonical names of `targets`, in their order (gpt_lora_targets_from_names() reads them back).
std::vector<std::string> gpt_lora_target_names(std::span<const GptLoraTarget> targets);
// "qkv,fc": the names joined by commas (the inverse of parse_gpt_lora_targets()).
std::string format_gpt_lora_targets(std::span<const GptLoraTarget> targets);
// Every canonical name and alias, for messages.
std::string gpt_lora_allowed_targets();
// The base linear a target adapts (itself for the first kNumGptLinears; qkv for q/k/v_proj, fc
// for gate/up_proj).
GptLoraTarget gpt_lora_base_linear(GptLoraTarget t);

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
// keeps one Int8Linear per shape and their workspace (GptBufferTable::int8_ws). CPU only.
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

// (in, out) of the adapter of `t` in a block of `arch` (D = attn_width(), C unless head_dim is
// set): qkv (C, qkv_rows()), proj (D, C), fc (C, fc_rows()), fc_proj (F, C); q_proj (C, D),
// k_proj and v_proj (C, kv_heads head_dim),
// gate_proj and up_proj (C, F). A base linear `t` (< kNumGptLinears): the linear's own shape.
void gpt_lora_linear_shape(GptLoraTarget t, const GptArchitecture& arch, int64_t* in, int64_t* out);
// The first output row (column of the linear's output) the adapter of `t` writes: 0 for a whole
// linear; q_proj 0, k_proj D, v_proj D + kv_heads head_dim; gate_proj 0, up_proj F.
int64_t gpt_lora_row_offset(GptLoraTarget t, const GptArchitecture& arch);
// Throws zs::Error(kInvalidArgument) "gpt config: lora target ..." when the targets do not fit
// `arch`: gate_proj/up_proj without SwiGLU, or two targets that overlap (qkv with q/k/v_proj, fc
// with gate/up_proj).
void check_gpt_lora_targets(const GptLoraConfig& lora, const GptArchitecture& arch);

// Throws zs::Error(kUnsupported) "... LoRA adapters are implemented on the CPU backend only" when
// a model with adapters (lora_rank > 0) is asked for on a device other than the CPU.
void check_gpt_lora_device(int64_t lora_rank, DeviceKind device);

}  // namespace zs::nn
