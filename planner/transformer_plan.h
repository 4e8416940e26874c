// A transformer shape as the runtime's memory planner describes a model (planner/memory_plan.h):
// each unit's trainable parameter sizes and names, its frozen ones with their rows (LoRA on a
// frozen base), and the activations nn allocates for them. The one translation zs_plan, zs_train's
// memory check before work and the planner's tests use. Apart from zs_nn (library zs_planner)
// because it names the runtime's planner types, which zs_nn never depends on.
//
// Functions of their arguments (and of this CPU: nn/gpt_activations.h); thread-safe.
#pragma once

#include "core/buffer.h"
#include "core/dtype.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/transformer_shapes.h"
#include "planner/memory_plan.h"

namespace zs::nn {

// The units of `shape` in the order the model declares them (ModelDesc::from_model splits a built
// model the same way), without activations. Throws zs::Error(kInvalidArgument) for a bad shape.
ModelDesc transformer_model_desc(const TransformerShape& shape);

// transformer_activation_plan() of `shape` for whatever micro-batch and checkpointing the planner
// asks: in `compute_dtype`, on `device`, the CPU products on `cpu_gemm` built for `threads` (0:
// default_threads()), the LM head chunked as `head_chunk` says (GptRunSettings::head_chunk), the
// CPU attention `attention` (GptRunSettings::attention).
ActivationFn transformer_activations(const TransformerShape& shape, DType compute_dtype,
                                     DeviceKind device = DeviceKind::kCpu,
                                     CpuGemm cpu_gemm = CpuGemm::kOnednn, int threads = 0,
                                     int64_t head_chunk = kGptHeadChunkAuto,
                                     GptAttention attention = GptRunSettings{}.attention);

}  // namespace zs::nn
