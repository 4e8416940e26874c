#include "runtime/engine_config.h"

#include "core/error.h"
#include "runtime/agreement.h"

namespace zs {

std::vector<Setting> engine_settings(const EngineConfig& c) {
  auto i = [](int64_t v) { return std::to_string(v); };
  auto f = [](double v) { return setting_value(v); };
  const optim::AdamWConfig& a = c.optimizer.adamw;
  const optim::LrSchedule& s = c.optimizer.schedule;
  const optim::LossScalerConfig& l = c.loss_scale;
  return {{"stage", i(static_cast<int>(c.stage))},
          {"precision.param_dtype", std::string(dtype_name(c.precision.param_dtype))},
          {"precision.grad_dtype", std::string(dtype_name(c.precision.grad_dtype))},
          {"optimizer.kind", c.optimizer.kind == OptimizerKind::kAdamW ? "adamw" : "sgd"},
          {"optimizer.adamw.beta1", f(a.beta1)},
          {"optimizer.adamw.beta2", f(a.beta2)},
          {"optimizer.adamw.eps", f(a.eps)},
          {"optimizer.adamw.weight_decay", f(a.weight_decay)},
          {"optimizer.sgd.momentum", f(c.optimizer.sgd.momentum)},
          {"optimizer.sgd.weight_decay", f(c.optimizer.sgd.weight_decay)},
          {"optimizer.schedule.lr", f(s.lr)},
          {"optimizer.schedule.warmup_steps", i(s.warmup_steps)},
          {"optimizer.schedule.total_steps", i(s.total_steps)},
          {"optimizer.schedule.min_ratio", f(s.min_ratio)},
          {"loss_scale_set", i(c.loss_scale_set)},
          {"loss_scale.dynamic", i(l.dynamic)},
          {"loss_scale.initial", f(l.initial)},
          {"loss_scale.growth", f(l.growth)},
          {"loss_scale.backoff", f(l.backoff)},
          {"loss_scale.growth_interval", i(l.growth_interval)},
          {"loss_scale.min_scale", f(l.min_scale)},
          {"loss_scale.hysteresis", i(l.hysteresis)},
          {"clip_norm", f(c.clip_norm)},
          {"micro_batches", i(c.micro_batches)},
          {"prefetch", i(c.prefetch)},
          {"seed", std::to_string(c.seed)},
          {"offload.optimizer", i(c.offload.optimizer)},
          {"align", i(c.align)},
          {"optimizer_threads", i(c.optimizer_threads)},
          {"max_consecutive_skips", i(c.max_consecutive_skips)}};
}

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
