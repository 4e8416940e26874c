#include "models/gpt/gpt_config.h"

#include <algorithm>

#include "core/error.h"

namespace zs::nn {

void GptRunSettings::validate() const {
  ZS_CHECK(batch > 0, ErrorCode::kInvalidArgument, "gpt config: batch must be positive, got {}",
           batch);
  ZS_CHECK(
      compute_dtype == DType::kF32 || compute_dtype == DType::kBF16 || compute_dtype == DType::kF16,
      ErrorCode::kInvalidArgument, "gpt config: compute dtype must be fp32, bf16 or fp16, got {}",
      dtype_name(compute_dtype));
  ZS_CHECK(threads >= 0 && threads <= 1024, ErrorCode::kInvalidArgument,
           "gpt config: threads {} is outside 0..1024", threads);
  ZS_CHECK(head_chunk >= kGptHeadChunkAuto, ErrorCode::kInvalidArgument,
           "gpt config: head_chunk {} is not auto (-1), off (0) or a row count", head_chunk);
  ZS_CHECK(attention == GptAttention::kGemm || attention == GptAttention::kFused,
           ErrorCode::kInvalidArgument, "gpt config: attention {} is not gemm (0) or fused (1)",
           static_cast<int>(attention));
}

std::string_view gpt_attention_name(GptAttention a) {
  return a == GptAttention::kFused ? "fused" : "gemm";
}

std::optional<GptAttention> gpt_attention_from_name(std::string_view name) {
  if (name == "gemm") return GptAttention::kGemm;
  if (name == "fused") return GptAttention::kFused;
  return std::nullopt;
}

int64_t gpt_head_chunk_rows(int64_t M, int64_t V, int64_t head_chunk) {
  if (head_chunk == kGptHeadChunkOff || head_chunk >= M) return M;
  if (head_chunk > 0) return head_chunk;
  if (4 * M * V <= kGptHeadChunkAutoBytes) return M;
  return std::clamp<int64_t>(kGptHeadChunkAutoChunkBytes / (4 * V), 1, M);
}

void GptConfig::validate() const {
  arch.validate();
  run.validate();
  const long double tokens = static_cast<long double>(run.batch) * arch.context;
  ZS_CHECK(tokens <= (1 << 24), ErrorCode::kInvalidArgument,
           "gpt config: batch {} x context {} = {:.0f} tokens per micro-batch, more than the {} "
           "allowed",
           run.batch, arch.context, static_cast<double>(tokens), 1 << 24);
  adapters.validate();
  check_gpt_lora_targets(adapters.lora, arch);
}

int64_t GptConfig::num_params() const {
  return arch.num_params() + arch.layers * adapters.num_lora_params_per_block(arch);
}

int64_t GptConfig::num_trainable_params() const {
  if (adapters.lora.enabled() && adapters.lora.freeze_base)
    return arch.layers * adapters.num_lora_params_per_block(arch);
  return num_params();
}

}  // namespace zs::nn
