// Transformer shapes a planner can name without building the model: zeroshard's GPT (nn/gpt.h) and
// LLaMA-style models, by dimensions or by name (gpt2 ... llama-7b), each unit's parameter sizes,
// and their activations: exact for our GPT (nn/gpt_activations.h, the sizes its models allocate),
// an estimate for LLaMA (docs/memory.md). zs_plan hands the units and the activations to the
// runtime's planner (runtime/memory_plan.h), which knows no model.
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
#include "runtime/activation_plan.h"

namespace zs::nn {

// kGpt: zeroshard's GptModel (nn/gpt.h): learned positions, pre-LN blocks with biases, GELU
//   MLP [F, C] / [C, F], final LN, untied LM head; units embed, block.0..L-1, head.
// kLlama: LLaMA-style: no biases, RMSNorm, rotary positions (no parameters), SwiGLU MLP with
//   three [F, C] matrices, untied output; same unit split.
enum class TransformerFamily { kGpt, kLlama };

struct TransformerShape {
  TransformerFamily family = TransformerFamily::kGpt;
  int layers = 12;
  int width = 768;  // C
  int heads = 12;
  int ffn = 0;  // F; 0 = 4 * width. Any F plans; GptModel itself needs a multiple of the width.
  int vocab = 50257;
  int context = 1024;  // T

  int ffn_width() const { return ffn > 0 ? ffn : 4 * width; }
  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
  // Parameter elements per unit, per parameter, in the order the model declares them. Validates.
  std::vector<std::vector<int64_t>> unit_param_numels() const;
  int64_t num_params() const;
};

// The kGpt shape of a GptConfig (its batch, dtype and checkpointing are the activation plan's
// arguments).
TransformerShape transformer_shape_of(const GptConfig& c);

// gpt2, gpt2-medium, gpt2-large, gpt2-xl (GPT-2 dims, our GPT's untied head), llama-7b (LLaMA
// 6.7B dims: 32 layers, hidden 4096, 32 heads, FFN 11008, vocab 32000, context 2048). nullopt
// for an unknown name.
std::optional<TransformerShape> transformer_shape_by_name(std::string_view name);
std::vector<std::string> transformer_shape_names();

// Activations of one rank at `micro_batch` sequences per micro-batch. kGpt: gpt_activation_plan()
// for the shape's dimensions, the bytes nn::GptModel (kCpu, its GEMM workspace for `cpu_gemm`
// included) or nn::CudaGptModel (kCuda, its cuBLASLt workspace included, and its pinned host
// bytes) allocates for GptConfig{layers, heads, width, context, vocab, batch = micro_batch,
// ffn_mult = ffn / width, checkpoint, compute_dtype}. kLlama: an estimate (docs/memory.md), the
// same on both devices. Throws zs::Error(kInvalidArgument) for a bad shape or micro_batch < 1.
ActivationPlan transformer_activation_plan(const TransformerShape& shape, int64_t micro_batch,
                                           DType compute_dtype, bool checkpoint,
                                           DeviceKind device = DeviceKind::kCpu,
                                           CpuGemm cpu_gemm = CpuGemm::kOnednn);

}  // namespace zs::nn
