#include "planner/transformer_plan.h"

#include "models/gpt/gpt_specs.h"
#include "runtime/tied_params.h"

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
  // The names and ties as the engine takes them from the model's declarations (nn/gpt_specs.h).
  GptConfig c;
  c.arch = shape.arch();
  c.adapters = shape.adapters;
  std::vector<std::vector<ParamSpec>> specs;
  for (size_t u = 0; u < d.units.size(); ++u) {
    specs.push_back(gpt_unit_specs(c, u));
    d.names.emplace_back();
    d.shapes.emplace_back();
    d.unit_names.push_back(gpt_unit_name(c, u));
    for (const ParamSpec& p : specs.back()) {
      if (!p.trainable || p.tied()) continue;
      d.names.back().push_back(gpt_unit_name(c, u) + "." + p.name);
      d.shapes.back().push_back(p.shape);
    }
  }
  if (c.arch.tied_embeddings)
    d.ties = resolve_tied_params(specs, [&c](size_t u) { return gpt_unit_name(c, u); });
  return d;
}

ActivationFn transformer_activations(const TransformerShape& shape, DType compute_dtype,
                                     DeviceKind device, CpuGemm cpu_gemm, int threads,
                                     int64_t head_chunk, GptAttention attention) {
  return [=](int64_t micro_batch, bool checkpoint) {
    return transformer_activation_plan(shape, micro_batch, compute_dtype, checkpoint, device,
                                       cpu_gemm, threads, head_chunk, attention);
  };
}

}  // namespace zs::nn
