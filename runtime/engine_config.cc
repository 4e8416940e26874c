#include "runtime/engine_config.h"

#include "core/error.h"

namespace zs {

ZeroStage zero_stage_from_int(int stage) {
  ZS_CHECK(stage >= 0 && stage <= 3, ErrorCode::kInvalidArgument,
           "ZeRO stage {} is not one of 0, 1, 2, 3", stage);
  return static_cast<ZeroStage>(stage);
}

void EngineConfig::validate() const {
  const int s = static_cast<int>(stage);
  ZS_CHECK(s >= 0 && s <= 3, ErrorCode::kInvalidArgument, "ZeRO stage {} is not one of 0, 1, 2, 3",
           s);
  const DType p = precision.param_dtype;
  ZS_CHECK(p == DType::kF32 || p == DType::kBF16 || p == DType::kF16, ErrorCode::kInvalidArgument,
           "compute dtype {} is not one of fp32, bf16, fp16", dtype_name(p));
  const DType g = precision.grad_dtype;
  ZS_CHECK(g == DType::kF32 || g == p, ErrorCode::kInvalidArgument,
           "gradient dtype {} must be fp32 or the compute dtype {}", dtype_name(g), dtype_name(p));
  ZS_CHECK(micro_batches >= 1, ErrorCode::kInvalidArgument, "micro_batches {} < 1", micro_batches);
  ZS_CHECK(prefetch >= 0 && prefetch <= 64, ErrorCode::kInvalidArgument,
           "prefetch depth {} is outside 0..64", prefetch);
  ZS_CHECK(align >= 1 && align <= 4096, ErrorCode::kInvalidArgument,
           "alignment {} is outside 1..4096 elements", align);
  ZS_CHECK(!(offload.optimizer && stage == ZeroStage::k0), ErrorCode::kInvalidArgument,
           "optimizer offload needs ZeRO stage 1, 2 or 3 (stage 0 keeps full replicas)");
  ZS_CHECK(!(offload.optimizer && optimizer.kind != OptimizerKind::kAdamW),
           ErrorCode::kInvalidArgument, "optimizer offload supports AdamW only");
  ZS_CHECK(
      max_consecutive_skips >= -1 && max_consecutive_skips <= 1000000, ErrorCode::kInvalidArgument,
      "max_consecutive_skips {} is outside -1 (the default) .. 1000000", max_consecutive_skips);
  ZS_CHECK(optimizer.schedule.lr >= 0.0f, ErrorCode::kInvalidArgument,
           "learning rate {} is negative", optimizer.schedule.lr);
}

}  // namespace zs
