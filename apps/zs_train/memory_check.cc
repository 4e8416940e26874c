#include "memory_check.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/host_memory.h"
#include "data_source.h"
#include "models/gpt/gpt_activations.h"
#include "planner/memory_plan.h"
#include "planner/transformer_plan.h"

namespace zs::train {

std::string human_bytes(double b) {
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

RunMemory plan_run_memory(const TrainOptions& o, int world) {
  const bool cpu = o.device == "cpu";
  const nn::TransformerShape shape = nn::transformer_shape_of(o.model.arch, o.model.adapters);
  ModelDesc desc = nn::transformer_model_desc(shape);
  if (cpu) {
    desc.activations = nn::transformer_activations(
        shape, o.engine.precision.param_dtype, DeviceKind::kCpu, nn::this_process_cpu_gemm(),
        o.model.run.threads, o.model.run.head_chunk, o.model.run.attention);
  }
  PlanConfig c;
  c.engine = o.engine;
  c.world = world;
  c.global_batch = static_cast<int64_t>(world) * o.engine.micro_batches * o.model.run.batch;
  c.checkpoint_activations = o.model.run.checkpoint_activations;
  c.device = cpu ? DeviceKind::kCpu : DeviceKind::kCuda;
  const MemoryPlan plan = plan_memory(desc, c);
  RunMemory m;
  m.data_bytes = dataset_bytes(o.data_source());
  if (cpu) {
    for (int k = 0; k < kNumMemCategories; ++k) m.plan_bytes += plan.bytes(MemCategory(k));
    m.breakdown = fmt::format("model states {}, activations {}, communication buffers {}",
                              human_bytes(plan.model_states_bytes()),
                              human_bytes(plan.bytes(MemCategory::kActivations)),
                              human_bytes(plan.bytes(MemCategory::kCommBuffers)));
    if (plan.host_bytes() > 0)
      m.breakdown += fmt::format(" (of which host offload {})", human_bytes(plan.host_bytes()));
  } else {
    m.plan_bytes = plan.host_bytes();
    m.breakdown = fmt::format("host offload {}", human_bytes(plan.host_bytes()));
  }
  m.breakdown += fmt::format(", training {} {}", o.data_source().shards() ? "tokens" : "text",
                             human_bytes(m.data_bytes));
  if (o.checkpoint.save_async && !o.checkpoint.save_dir.empty()) {
    m.snapshot_bytes = checkpoint_snapshot_bytes(plan, o.engine);
    m.breakdown += fmt::format(", checkpoint snapshot {} (--save-async)",
                               human_bytes(static_cast<double>(m.snapshot_bytes)));
  }
  if (o.checkpoint.save_memory_every > 0 && !o.checkpoint.save_dir.empty()) {
    m.memory_tier_bytes = memory_tier_bytes(plan, o.engine);
    m.breakdown += fmt::format(", memory-tier checkpoints {} (--save-memory-every)",
                               human_bytes(static_cast<double>(m.memory_tier_bytes)));
  }
  return m;
}

void check_memory(const RunMemory& need, int local_ranks) {
  const HostMemory have = host_memory();
  const int64_t node_need = need.per_rank() * local_ranks;
  const char* way_out =
      "a smaller model, batch or text, more ranks (ZeRO-3 shards the model states), "
      "--offload-optimizer or --checkpoint-activations may fit (zs_plan prints the plan); "
      "--memory-check off starts anyway";
  ZS_CHECK(have.node_available < 0 || node_need <= have.node_available, ErrorCode::kOutOfMemory,
           "not enough memory on this node: its {} need {} ({} per rank: {}), {} is "
           "available ({}); {}",
           local_ranks == 1 ? std::string("one rank") : fmt::format("{} ranks", local_ranks),
           human_bytes(node_need), human_bytes(need.per_rank()), need.breakdown,
           human_bytes(have.node_available), have.node_source, way_out);
  ZS_CHECK(have.process_available < 0 || need.per_rank() <= have.process_available,
           ErrorCode::kOutOfMemory,
           "not enough memory for this process: one rank needs {} ({}), {} leaves {}; {}",
           human_bytes(need.per_rank()), need.breakdown, have.process_source,
           human_bytes(have.process_available), way_out);
}

}  // namespace zs::train
