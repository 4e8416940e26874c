// The planner's description of a transformer, for tests, as zs_plan builds it: the units'
// parameter sizes (trainable, and frozen with their rows when LoRA adapters train on a frozen
// base) and the activations come from nn (nn/transformer_shapes.h), the model states and buffers
// from the runtime's planner, which knows no model.
#pragma once

#include "nn/gpt_activations.h"
#include "nn/transformer_shapes.h"
#include "runtime/memory_plan.h"

namespace zs::test {

// `shape`'s units, and its activations in `compute_dtype` on `device` (the CPU GPT's products on
// `cpu_gemm`) for whatever micro-batch and checkpointing the planner asks. Throws zs::Error for a
// bad shape.
inline ModelDesc transformer_desc(const nn::TransformerShape& shape, DType compute_dtype,
                                  DeviceKind device = DeviceKind::kCpu,
                                  nn::CpuGemm cpu_gemm = nn::CpuGemm::kOnednn) {
  ModelDesc d = ModelDesc::from_units({}, [=](int64_t micro_batch, bool ckpt) {
    return nn::transformer_activation_plan(shape, micro_batch, compute_dtype, ckpt, device,
                                           cpu_gemm);
  });
  bool any_frozen = false;
  for (const auto& unit : shape.unit_params()) {
    d.units.emplace_back();
    d.frozen.emplace_back();
    for (const nn::TransformerParam& p : unit) {
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

}  // namespace zs::test
