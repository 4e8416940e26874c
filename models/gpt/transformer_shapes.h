// Transformer shapes a planner can name without building the model: zeroshard's decoder
// (models/gpt/gpt.h) in its GPT-2 and Llama forms and any mix of their components, by dimensions or
// by name (gpt2 ... llama-7b), each unit's parameter sizes, and their activations: exact for both
// families (models/gpt/gpt_activations.h, the sizes the models allocate). zs_plan hands the units
// and the activations to the runtime's planner (planner/memory_plan.h), which knows no model.
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
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_config.h"
#include "unit/activation_plan.h"

namespace zs::nn {

// kGpt: GPT-2's components (learned positions, LayerNorm, biases, GELU MLP [F, C] / [C, F]), or
//   any mix of components TransformerShape::components gives (a Qwen2 or Mistral directory).
// kLlama: Llama's (RMSNorm, rotary positions, SwiGLU MLP with gate and up fused [2F, C] and down
//   [C, F], no biases), whatever the component fields say; head_dim and qk_norm (Qwen3) and
//   components.tied_embeddings apply to both. Units embed, block.0..L-1, head ([Note: architecture
//   components] in models/gpt/gpt_architecture.h).
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
  int ffn = 0;  // F; 0 = 4 * width
  int vocab = 50257;
  int context = 1024;    // T
  int kv_heads = 0;      // grouped-query attention's key/value heads; 0: heads
  int head_dim = 0;      // per-head width; 0: width / heads (Qwen3 sets it apart)
  bool qk_norm = false;  // Qwen3's per-head q/k RMSNorm (q_norm, k_norm [head_dim] per block)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  // The components of a kGpt shape (norm, positions, MLP, biases): GPT-2's by default;
  // transformer_shape_of() copies an architecture's. Ignored for kLlama.
  GptArchitecture components;
  // The adapters. LoRA ([Note: LoRA] in models/gpt/gpt_adapters.h): each block's targeted
  // linears get lora_A [r, in] and lora_B [out, r] after its base parameters, and with
  // lora.freeze_base every base parameter is frozen, as GptModel declares them
  // (models/gpt/gpt_specs.h); rank 0: none. Computing from int8 base weights ([Note: int8 base
  // compute] in models/gpt/gpt_adapters.h): with int8.accept the four base linear weights of each
  // block accept int8 records, and the activations include the Int8Linears' workspace
  // (GptBufferTable::int8_ws) at its threshold.
  GptAdapters adapters;

  int ffn_width() const { return ffn > 0 ? ffn : 4 * width; }
  // The model this shape describes (GptModel builds it; its units are unit_params()).
  GptArchitecture arch() const;
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

// The shape of an architecture with its adapters (a run's batch, dtype and checkpointing are the
// activation plan's arguments): kLlama when every component is Llama's, else kGpt with the
// architecture's components.
TransformerShape transformer_shape_of(const GptArchitecture& arch,
                                      const GptAdapters& adapters = {});

// gpt2, gpt2-medium, gpt2-large, gpt2-xl (GPT-2 dims, our GPT's untied head), gpt-6b (GPT-J 6B's
// dims on our GPT: 28 layers, hidden 4096, 16 heads, FFN 16384, vocab 50400, context 2048: 6.06e9
// parameters), llama-7b (LLaMA 6.7B dims: 32 layers, hidden 4096, 32 heads, FFN 11008, vocab
// 32000, context 2048), llama-3-8b (32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336,
// vocab 128256, rope theta 500000, context 8192), llama-3.2-1b (16 layers, hidden 2048, 32 heads,
// 8 KV heads, FFN 8192, vocab 128256, rope theta 500000, tied, context 8192; its llama3 rope
// scaling changes no size), qwen3-0.6b (Llama's components with q/k norms: 28 layers, hidden
// 1024, 16 heads of head_dim 128, 8 KV heads, FFN 3072, vocab 151936, rope theta 1e6, eps 1e-6,
// tied, context 4096). nullopt for an unknown name.
std::optional<TransformerShape> transformer_shape_by_name(std::string_view name);
std::vector<std::string> transformer_shape_names();

// Activations of one rank at `micro_batch` sequences per micro-batch: gpt_activation_plan() for
// the shape's architecture, the bytes nn::GptModel (kCpu, its GEMM workspace for `cpu_gemm`
// included) or nn::CudaGptModel (kCuda, its cuBLASLt workspace included, and its pinned host
// bytes) allocates for GptConfig{arch(), run {batch = micro_batch, compute_dtype, checkpoint,
// threads}, adapters} (threads: the OpenMP team, which sizes oneDNN's scratchpads and the fused
// attention's tiles; 0: default_threads(); head_chunk, attention: GptRunSettings'). Throws
// zs::Error(kInvalidArgument) for a bad shape or micro_batch < 1, and zs::Error(kUnsupported) for
// adapters, a chunked head or a component the CUDA model lacks on kCuda (check_gpt_lora_device,
// check_gpt_cuda_buffers).
ActivationPlan transformer_activation_plan(const TransformerShape& shape, int64_t micro_batch,
                                           DType compute_dtype, bool checkpoint,
                                           DeviceKind device = DeviceKind::kCpu,
                                           CpuGemm cpu_gemm = CpuGemm::kOnednn, int threads = 0,
                                           int64_t head_chunk = kGptHeadChunkAuto,
                                           GptAttention attention = GptRunSettings{}.attention);

}  // namespace zs::nn
