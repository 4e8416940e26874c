// What the gather paths (runtime/gather_path.h) and reduce paths (runtime/reduce_path.h) share:
// the configuration they are chosen from, the communicators they run over, and the collective
// calls they report to the communication model (planner/comm_model.h).
//
// [Note: communication paths]
// How a group's bytes move is chosen once per group, like the optimizer-state placements
// (runtime/optimizer_states.h): a gather path for its sharded parameters (plain, qwZ's int8
// chunks, hpZ's node-local secondary shard over either) and a reduce path for its gradient (the
// full buffer, the sharded reduce-scatter, qgZ's int8 all-to-alls, the world-invariant tree). A
// path owns its layout on the wire, the sizes of the buffers it needs (the buffer plan asks it),
// its communicators and its collective calls; ParamGroup keeps the state transitions, and the
// planner asks the same path objects for the step's calls. A new mode is one file under
// runtime/paths/ and one line in its registry (runtime/paths/registry.cc).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "core/dtype.h"
#include "runtime/engine_config.h"

namespace zs {

// The fields of a configuration that choose and size the paths.
struct PathConfig {
  int stage = 3;
  DType param_dtype = DType::kBF16;
  DType grad_dtype = DType::kBF16;
  int micro_batches = 1;
  bool world_invariant = false;
  ZeroPPConfig zeropp;
  int node_size = 0;    // ranks per node ([Note: node layout]); 0 = the group's ranks
  bool hybrid = false;  // the layouts span a shard group smaller than the job ([Note: hybrid
                        // sharding]): the paths' world collectives run over the shard group
};
// `hybrid`: the engine's shard group is smaller than its world.
PathConfig path_config(const EngineConfig& c, bool hybrid);

// Which ranks a collective runs over. kWorld: the job; kShardGroup / kReplicaGroup: hybrid
// sharding's groups; kHpzGroup: hpZ's secondary group, K = hpz_partition_size consecutive ranks;
// kNodeLocal: the L ranks of a node; kCrossNode: the N ranks with one local rank (qgZ's groups).
enum class CommScope { kWorld, kShardGroup, kReplicaGroup, kHpzGroup, kNodeLocal, kCrossNode };

// One kind of collective a path issues for its group in a step: `calls` calls of `count`
// elements of `dtype` each.
struct PathCall {
  const char* what;  // the communication model's item name, e.g. "param all-gather"
  CollectiveKind kind;
  CommScope scope;
  bool overlappable;  // started asynchronously and not waited for at once
  int64_t calls;
  int64_t count;
  DType dtype;
};

// The communicators the engine hands a path (those of modes that are off are null). `group` is
// the shard group's (the job's without hybrid sharding); its scope in PathCall is kWorld, which
// the communication model maps to kShardGroup under hybrid sharding.
struct PathComms {
  Communicator* group = nullptr;
  Communicator* hpz = nullptr;
  Communicator* node_local = nullptr;
  Communicator* cross_node = nullptr;
};

}  // namespace zs
