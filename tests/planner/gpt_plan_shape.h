// The planner's description of a transformer, for tests, as zs_plan builds it: the units'
// parameter sizes (trainable, and frozen with their rows when LoRA adapters train on a frozen
// base) and the activations come from nn (models/gpt/transformer_shapes.h), the model states and
// buffers from the runtime's planner, which knows no model.
#pragma once

#include "models/gpt/gpt_activations.h"
#include "planner/transformer_plan.h"

namespace zs::test {

// `shape`'s units, and its activations in `compute_dtype` on `device` (the CPU GPT's products on
// `cpu_gemm`, built for `threads`, 0: default_threads()) for whatever micro-batch and
// checkpointing the planner asks, the LM head chunked as `head_chunk` says. Throws zs::Error for a
// bad shape.
inline ModelDesc transformer_desc(const nn::TransformerShape& shape, DType compute_dtype,
                                  DeviceKind device = DeviceKind::kCpu,
                                  nn::CpuGemm cpu_gemm = nn::CpuGemm::kOnednn, int threads = 0,
                                  int64_t head_chunk = nn::kGptHeadChunkAuto) {
  ModelDesc d = nn::transformer_model_desc(shape);
  d.activations =
      nn::transformer_activations(shape, compute_dtype, device, cpu_gemm, threads, head_chunk);
  return d;
}

}  // namespace zs::test
