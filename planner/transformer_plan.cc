#include "planner/transformer_plan.h"

namespace zs::nn {

ModelDesc transformer_model_desc(const TransformerShape& shape) {
  ModelDesc d;
  bool any_frozen = false;
  for (const auto& unit : shape.unit_params()) {
    d.units.emplace_back();
    d.frozen.emplace_back();
    for (const TransformerParam& p : unit) {
      if (p.trainable) {
        d.units.back().push_back(p.numel);
      } else {
        d.frozen.back().push_back({p.numel, p.rows, p.accepts_int8});
        any_frozen = true;
      }
    }
  }
  if (!any_frozen) d.frozen.clear();
  return d;
}

ActivationFn transformer_activations(const TransformerShape& shape, DType compute_dtype,
                                     DeviceKind device, CpuGemm cpu_gemm) {
  return [=](int64_t micro_batch, bool checkpoint) {
    return transformer_activation_plan(shape, micro_batch, compute_dtype, checkpoint, device,
                                       cpu_gemm);
  };
}

}  // namespace zs::nn
