// A GPT model's description (models/gpt/gpt_model_base.h), shared by the CPU and CUDA models: its
// architecture (models/gpt/gpt_architecture.h), the run's settings, and its adapters
// (models/gpt/gpt_adapters.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "models/gpt/gpt_adapters.h"
#include "models/gpt/gpt_architecture.h"

namespace zs::nn {

// How the CPU model computes causal attention: kGemm, nn::Attention (batched GEMMs over the whole
// [B, H, T, T] scores, kept for backward); kFused, nn::FlashAttention (one kernel over 64 x 64
// tiles, only O and each row's log-sum-exp kept). The CUDA model has its own attention and ignores
// it.
enum class GptAttention : uint8_t { kGemm, kFused };
// "gemm", "fused".
std::string_view gpt_attention_name(GptAttention a);
// The kind named `name` ("gemm" or "fused"); nullopt for any other.
std::optional<GptAttention> gpt_attention_from_name(std::string_view name);

// How a run computes the model: not part of the architecture (llm.c's B and T come in at call
// time; here B with the model's buffers).
struct GptRunSettings {
  int batch = 8;  // B: sequences per micro-batch
  // The dtype the engine hands parameters in (MixedPrecisionPolicy::param_dtype): fp32, bf16 or
  // fp16. Must match the engine's.
  DType compute_dtype = DType::kF32;
  // OpenMP/oneDNN/Eigen threads for this model's compute; 0 = default_threads().
  int threads = 0;
  // Keep only each block's input in forward and recompute the block in backward. Gradients are
  // bitwise identical to the non-checkpointed model; activation memory drops.
  bool checkpoint_activations = false;
  // The LM head and its loss in chunks of token rows ([Note: chunked head] in nn/lm_head.h):
  // kGptHeadChunkAuto, kGptHeadChunkOff, or N >= 1 rows per chunk (N >= batch x context: one
  // chunk, the unchunked head). gpt_head_chunk_rows() resolves it.
  int64_t head_chunk = -1;  // kGptHeadChunkAuto
  // The CPU model's attention kernel (GptAttention). kGemm by default: the fused kernel, without
  // FMA (the kernels' same-bits convention), ran 1.1-1.4x slower than oneDNN's GEMMs at the
  // benchmark shapes (hd 32 and 64, T 128 and 256); it saves the [B, H, T, T] activations.
  GptAttention attention = GptAttention::kGemm;

  // Throws zs::Error(kInvalidArgument) "gpt config: ..." naming the first bad field.
  void validate() const;
};

// GptRunSettings::head_chunk's two named values.
constexpr int64_t kGptHeadChunkAuto = -1;  // chunk only when the logits would be large
constexpr int64_t kGptHeadChunkOff = 0;    // the whole [M, V] logits at once
// auto: the head chunks when the fp32 logits [M, V] would exceed this many bytes, into chunks of
// kGptHeadChunkAutoChunkBytes / (4 V) rows (at least 1).
constexpr int64_t kGptHeadChunkAutoBytes = int64_t{256} << 20;      // 256 MiB
constexpr int64_t kGptHeadChunkAutoChunkBytes = int64_t{32} << 20;  // 32 MiB
// The rows of one head chunk for M = batch x context tokens, vocabulary V and the setting
// `head_chunk`: M when the head does not chunk (off, auto below the bound, N >= M), else the
// chunk's rows (the last chunk holds the M mod rows left, when not 0). A function of the
// micro-batch shape alone: never of ranks or threads.
int64_t gpt_head_chunk_rows(int64_t M, int64_t V, int64_t head_chunk);

struct GptConfig {
  GptArchitecture arch;
  GptRunSettings run;
  GptAdapters adapters;  // off by default

  // Validates the three, then what they bound together (batch x context tokens per micro-batch).
  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
  // Parameter elements of the model (embeddings, blocks with their adapters, head), no padding.
  int64_t num_params() const;
  // The trainable ones: num_params(), or the adapters alone when adapters.lora.freeze_base.
  int64_t num_trainable_params() const;
};

}  // namespace zs::nn
