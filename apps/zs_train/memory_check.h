// zs_train's memory check before work (--memory-check, docs/reliability.md): the run's memory
// plan — the one zs_plan prints, from the planner the engine allocates from — plus the text every
// rank loads, with --save-async the checkpoint's host snapshot and with --save-memory-every the
// memory tier's checkpoints (in /dev/shm, which is RAM), times the ranks on this node,
// against what the node and each process may still take (core/host_memory.h). A run that cannot fit
// is refused in well under a second, naming the bytes needed and available, instead of growing
// until the OOM killer ends it.
#pragma once

#include <cstdint>
#include <string>

#include "options.h"

namespace zs::train {

struct RunMemory {
  int64_t plan_bytes = 0;      // the engine's and the model's bytes on one rank (every category)
  int64_t data_bytes = 0;      // the training text every rank holds
  int64_t snapshot_bytes = 0;  // --save-async: the checkpoint's host snapshot (0 without)
  // --save-memory-every: the memory tier's files (RAM-backed: they count against the node's
  // memory), two checkpoints' worth during a save (the new one and the one it replaces); 0 without.
  int64_t memory_tier_bytes = 0;
  int64_t per_rank() const { return plan_bytes + data_bytes + snapshot_bytes + memory_tier_bytes; }
  std::string breakdown;  // "model states 1.20 GiB, activations ..., data ..."
};

// The plan of `o` at `world` ranks (CPU: everything is host memory; CUDA: the host offload and the
// data only). Throws what the planner throws for a configuration it cannot plan.
RunMemory plan_run_memory(const TrainOptions& o, int world);

// Throws zs::Error(kOutOfMemory) when `local_ranks` ranks of `need` exceed what this node has
// available, or one rank exceeds its process limit. Not collective (each rank checks its node).
void check_memory(const RunMemory& need, int local_ranks);

// "1.50 GiB", "12.0 MiB", "512 B".
std::string human_bytes(double bytes);

}  // namespace zs::train
