// The shape and compute settings of a GPT model (nn/gpt_model_base.h), shared by the CPU and CUDA
// models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"

namespace zs::nn {

// The linears of a block that LoRA can adapt, in the order their adapters follow the block's base
// parameters (nn/gpt_specs.h); kGptLoraTargetNames spells them as GptLoraConfig::targets does.
enum class GptLoraTarget : uint8_t { kQkv, kProj, kFc, kFcProj };
constexpr int kNumGptLoraTargets = 4;
constexpr const char* kGptLoraTargetNames[kNumGptLoraTargets] = {"qkv", "proj", "fc", "fc_proj"};

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
  std::vector<std::string> targets = {"qkv", "proj", "fc", "fc_proj"};  // a subset, no repeats
  bool freeze_base = true;  // the base parameters are frozen; false: base and adapters train

  bool enabled() const { return rank > 0; }
  float scaling() const { return alpha / static_cast<float>(rank); }  // s = alpha / r
  // Bit t set when GptLoraTarget t is adapted; 0 without adapters. Assumes validated targets.
  uint32_t target_mask() const;
  bool targets_linear(GptLoraTarget t) const { return (target_mask() >> static_cast<int>(t)) & 1u; }
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

struct GptConfig {
  int layers = 4;
  int heads = 4;
  int width = 256;    // C; must divide by heads
  int context = 128;  // T: sequence length of training and the largest inference length
  int vocab = 256;
  int batch = 8;     // B: sequences per micro-batch
  int ffn_mult = 4;  // F = ffn_mult * width
  // Keep only each block's input in forward and recompute the block in backward. Gradients are
  // bitwise identical to the non-checkpointed model; activation memory drops.
  bool checkpoint_activations = false;
  // The dtype the engine hands parameters in (MixedPrecisionPolicy::param_dtype): fp32, bf16 or
  // fp16. Must match the engine's.
  DType compute_dtype = DType::kF32;
  // OpenMP/oneDNN/Eigen threads for this model's compute; 0 = default_threads().
  int threads = 0;
  // Low-rank adapters ([Note: LoRA]); off by default.
  GptLoraConfig lora;
  // Computing from int8 base weights ([Note: int8 base compute]); off by default.
  GptInt8Config int8;

  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
  // Parameter elements of the model (embeddings, blocks with their adapters, head), no padding.
  int64_t num_params() const;
  // The trainable ones: num_params(), or the adapters alone when lora.freeze_base.
  int64_t num_trainable_params() const;
  // Adapter elements of one block (0 without adapters).
  int64_t num_lora_params_per_block() const;
};

// (in, out) of the linear GptLoraTarget `t` adapts in a block of width C and FFN width F.
void gpt_lora_linear_shape(GptLoraTarget t, int64_t C, int64_t F, int64_t* in, int64_t* out);

// Throws zs::Error(kUnsupported) "... LoRA adapters are implemented on the CPU backend only" when
// a model with adapters (lora_rank > 0) is asked for on a device other than the CPU.
void check_gpt_lora_device(int64_t lora_rank, DeviceKind device);

}  // namespace zs::nn
