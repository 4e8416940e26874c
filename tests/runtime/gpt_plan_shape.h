// The planner's description of a transformer, for tests, as zs_plan builds it: the units'
// parameter sizes and the activations come from nn (nn/transformer_shapes.h), the model states
// and buffers from the runtime's planner, which knows no model.
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
  return ModelDesc::from_units(shape.unit_param_numels(), [=](int64_t micro_batch, bool ckpt) {
    return nn::transformer_activation_plan(shape, micro_batch, compute_dtype, ckpt, device,
                                           cpu_gemm);
  });
}

}  // namespace zs::test
