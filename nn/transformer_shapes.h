// Transformer shapes a planner can name without building the model: zeroshard's GPT (nn/gpt.h) and
// LLaMA-style models, by dimensions or by name (gpt2 ... llama-7b), each unit's parameter sizes,
// and their activations: exact for our GPT (nn/gpt_activations.h, the sizes its models allocate),
// an estimate for LLaMA (docs/memory.md). zs_plan hands the units and the activations to the
// runtime's planner (planner/memory_plan.h), which knows no model.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "nn/gpt_activations.h"
#include "nn/gpt_config.h"
#include "unit/activation_plan.h"

namespace zs::nn {

// kGpt: zeroshard's GptModel (nn/gpt.h): learned positions, pre-LN blocks with biases, GELU
//   MLP [F, C] / [C, F], final LN, untied LM head; units embed, block.0..L-1, head.
// kLlama: LLaMA-style: no biases, RMSNorm, rotary positions (no parameters), SwiGLU MLP with
//   three [F, C] matrices, untied output; same unit split.
enum class TransformerFamily { kGpt, kLlama };

// One parameter as a planner sees it: its elements, its first dimension when it is a matrix
// (2-D; 0 for any other shape, as frozen_param_desc() in runtime/buffer_plan.h: an int8 frozen
// base keeps one scale per row of a matrix), and whether it trains.
struct TransformerParam {
  int64_t numel = 0;
  int64_t rows = 0;
  bool trainable = true;
  bool accepts_int8 = false;  // ParamSpec::accepts_int8 ([Note: int8 base compute], gpt_adapters.h)
  bool operator==(const TransformerParam&) const = default;
};

struct TransformerShape {
  TransformerFamily family = TransformerFamily::kGpt;
  int layers = 12;
  int width = 768;  // C
  int heads = 12;
  int ffn = 0;  // F; 0 = 4 * width. Any F plans; GptModel itself needs a multiple of the width.
  int vocab = 50257;
  int context = 1024;  // T
  // The adapters, kGpt only. LoRA ([Note: LoRA] in nn/gpt_adapters.h): each block's targeted
  // linears get lora_A [r, in] and lora_B [out, r] after its base parameters, and with
  // lora.freeze_base every base parameter is frozen, as GptModel declares them (nn/gpt_specs.h);
  // rank 0: none. Computing from int8 base weights ([Note: int8 base compute] in
  // nn/gpt_adapters.h): with int8.accept the four base linear weights of each block accept int8
  // records, and the activations include the Int8Linears' workspace (GptCpuBytes::int8_ws) at its
  // threshold.
  GptAdapters adapters;

  int ffn_width() const { return ffn > 0 ? ffn : 4 * width; }
  // Throws zs::Error(kInvalidArgument) naming the first bad field (adapters: GptAdapters's
  // messages).
  void validate() const;
  // Each unit's parameters in the order the model declares them (adapters included). Validates.
  std::vector<std::vector<TransformerParam>> unit_params() const;
  // Parameter elements per unit, per parameter, in the order the model declares them, trainable
  // and frozen alike. Validates.
  std::vector<std::vector<int64_t>> unit_param_numels() const;
  int64_t num_params() const;
  int64_t num_trainable_params() const;  // num_params() less the frozen base
};

// The kGpt shape of an architecture with its adapters (a run's batch, dtype and checkpointing are
// the activation plan's arguments).
TransformerShape transformer_shape_of(const GptArchitecture& arch,
                                      const GptAdapters& adapters = {});

// gpt2, gpt2-medium, gpt2-large, gpt2-xl (GPT-2 dims, our GPT's untied head), gpt-6b (GPT-J 6B's
// dims on our GPT: 28 layers, hidden 4096, 16 heads, FFN 16384, vocab 50400, context 2048: 6.06e9
// parameters), llama-7b (LLaMA 6.7B dims: 32 layers, hidden 4096, 32 heads, FFN 11008, vocab
// 32000, context 2048). nullopt for an unknown name.
std::optional<TransformerShape> transformer_shape_by_name(std::string_view name);
std::vector<std::string> transformer_shape_names();

// Activations of one rank at `micro_batch` sequences per micro-batch. kGpt: gpt_activation_plan()
// for the shape's dimensions, the bytes nn::GptModel (kCpu, its GEMM workspace for `cpu_gemm`
// included) or nn::CudaGptModel (kCuda, its cuBLASLt workspace included, and its pinned host
// bytes) allocates for GptConfig{arch {layers, heads, width, context, vocab, ffn_mult = ffn /
// width}, run {batch = micro_batch, compute_dtype, checkpoint}, adapters}. kLlama: an estimate
// (docs/memory.md), the same on both devices. Throws zs::Error(kInvalidArgument) for a bad shape or
// micro_batch < 1, and zs::Error(kUnsupported) for adapters on kCuda (check_gpt_lora_device).
ActivationPlan transformer_activation_plan(const TransformerShape& shape, int64_t micro_batch,
                                           DType compute_dtype, bool checkpoint,
                                           DeviceKind device = DeviceKind::kCpu,
                                           CpuGemm cpu_gemm = CpuGemm::kOnednn);

}  // namespace zs::nn
