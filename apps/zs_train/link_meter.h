// Bytes one rank sends during an engine step, in all and by link class (within a node, between
// nodes), over every communicator the engine uses: its world communicator and, with hybrid
// sharding, the shard-group and replica-group communicators it split from it.
//
// The world's bytes by class are the HierarchicalCommunicator's link counters ([Note: link
// counters] in collectives/hierarchical_communicator.h). A hybrid-sharding sub-communicator's
// bytes are classed by where its members sit, for the layouts where a group is node-aligned
// (uniform nodes of L ranks, block placement, shard group size S with L % S == 0 or S % L == 0):
//   shard group, L % S == 0   on one node: all intra-node
//   shard group, S % L == 0   S/L nodes of L members: the ring lower bound in node-major order
//                             (the member with local rank L-1 sends its bytes across nodes)
//   replicas,    S % L == 0   one member per node: all inter-node
//   replicas,    L % S == 0   L/S members per node: the ring lower bound as above
// Otherwise (or without a HierarchicalCommunicator: CUDA) the classes are unknown (-1) and only
// the total is given.
#pragma once

#include <cstdint>

#include "collectives/hierarchical_communicator.h"
#include "runtime/engine.h"

namespace zs::train {

struct StepBytes {
  int64_t total = 0;   // sent, every communicator of the engine
  int64_t intra = -1;  // sent within a node; -1 unknown
  int64_t inter = -1;  // sent between nodes; -1 unknown
};

class LinkMeter {
 public:
  // `world` is the engine's communicator; `hier` the same object when it is a
  // HierarchicalCommunicator (else null).
  LinkMeter(Engine& engine, Communicator& world, const HierarchicalCommunicator* hier);
  void start();      // before a step
  StepBytes stop();  // after it: the bytes since start()

 private:
  // What a sub-communicator's bytes are, for the layouts above.
  struct SubPlace {
    bool known = false;
    bool crosses = false;  // some of its bytes go between nodes (ring: this member's sends)
  };
  StepBytes read() const;

  Engine& engine_;
  Communicator& world_;
  const HierarchicalCommunicator* hier_;
  SubPlace shard_place_, replica_place_;
  StepBytes at_start_;
};

}  // namespace zs::train
