#include "models/gpt/gpt_config.h"

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
