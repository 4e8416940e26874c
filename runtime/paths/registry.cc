// The registry of gather and reduce paths ([Note: communication paths] in runtime/comm_path.h):
// a new mode is a file defining its entry, declared and listed here.
#include "runtime/paths/registry.h"

#include "core/error.h"

namespace zs {

namespace paths {

extern const GatherEntry kQuantizedGather;    // quantized_gather_path.cc
extern const GatherEntry kPlainGather;        // plain_gather.cc
extern const GatherWrapper kSecondaryGather;  // secondary_gather.cc
extern const ReduceEntry kTreeReduce;         // tree_reduce.cc
extern const ReduceEntry kQuantizedReduce;    // quantized_reduce_path.cc
extern const ReduceEntry kShardedReduce;      // sharded_reduce.cc
extern const ReduceEntry kFullBufferReduce;   // full_buffer_reduce.cc

namespace {

// Tried in order: the first that applies is taken (the plain path always applies).
const GatherEntry* const kGatherPaths[] = {&kQuantizedGather, &kPlainGather};
const GatherWrapper* const kGatherWrappers[] = {&kSecondaryGather};
const ReduceEntry* const kReducePaths[] = {&kTreeReduce, &kQuantizedReduce, &kShardedReduce,
                                           &kFullBufferReduce};

}  // namespace

}  // namespace paths

PathConfig path_config(const EngineConfig& c, bool hybrid) {
  PathConfig p;
  p.stage = static_cast<int>(c.stage);
  p.param_dtype = c.precision.param_dtype;
  p.grad_dtype = c.precision.grad_dtype;
  p.micro_batches = c.micro_batches;
  p.world_invariant = c.world_invariant;
  p.zeropp = c.zeropp;
  p.node_size = c.node_size;
  p.hybrid = hybrid;
  return p;
}

std::unique_ptr<GatherPath> make_gather_path(const PathConfig& c, const GroupLayout& l,
                                             const FrozenLayout& f, int rank) {
  std::unique_ptr<GatherPath> path;
  for (const paths::GatherEntry* e : paths::kGatherPaths) {
    if (e->applies(c)) {
      path = e->make(c, l, f, rank);
      break;
    }
  }
  ZS_ASSERT(path != nullptr);
  for (const paths::GatherWrapper* w : paths::kGatherWrappers) {
    if (w->applies(c)) path = w->wrap(std::move(path), c, l, rank);
  }
  return path;
}

std::unique_ptr<ReducePath> make_reduce_path(const PathConfig& c, const GroupLayout& l, int rank) {
  for (const paths::ReduceEntry* e : paths::kReducePaths) {
    if (e->applies(c)) return e->make(c, l, rank);
  }
  ZS_ASSERT(false);
  return nullptr;
}

}  // namespace zs
