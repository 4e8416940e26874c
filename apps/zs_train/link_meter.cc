#include "link_meter.h"

namespace zs::train {
namespace {

// A node-aligned group of `members_per_node` ranks on each of `nodes` nodes, this rank the one
// with `local` among its node's members: the ring lower bound sends across nodes from the last.
bool ring_crosses(int members_per_node, int nodes, int local) {
  return nodes > 1 && local == members_per_node - 1;
}

}  // namespace

LinkMeter::LinkMeter(Engine& engine, Communicator& world, const HierarchicalCommunicator* hier)
    : engine_(engine), world_(world), hier_(hier) {
  if (!hier_) return;
  const int W = world.size(), L = hier_->local_size(), S = engine.shard_group_size();
  const bool block =
      hier_->num_nodes() * L == W && world.rank() == hier_->node_index() * L + hier_->local_rank();
  if (!block || S == W) return;
  const int R = W / S, j = engine.replica_index();
  if (L % S == 0) {
    shard_place_ = {true, false};
    const int per_node = L / S;
    replica_place_ = {true, ring_crosses(per_node, R / per_node, j % per_node)};
  } else if (S % L == 0) {
    shard_place_ = {true, ring_crosses(L, S / L, engine.shard_group_rank() % L)};
    replica_place_ = {true, R > 1};
  }
}

StepBytes LinkMeter::read() const {
  StepBytes b;
  b.total = world_.counters().total_sent();
  if (hier_) {
    b.intra = hier_->link_counters().intra_node.total_sent();
    b.inter = hier_->link_counters().inter_node.total_sent();
  } else if (world_.size() == 1) {
    b.intra = b.inter = 0;
  }
  auto add = [&](const Communicator* c, const SubPlace& place) {
    if (c == nullptr || c == &world_) return;
    const int64_t sent = c->counters().total_sent();
    b.total += sent;
    if (!place.known) {
      b.intra = b.inter = -1;
      return;
    }
    if (b.intra < 0) return;
    (place.crosses ? b.inter : b.intra) += sent;
  };
  add(&engine_.shard_communicator(), shard_place_);
  add(engine_.replica_communicator(), replica_place_);
  // ZeRO++ ([Note: node layout] in runtime/engine_config.h): node-local and cross-node groups.
  add(engine_.node_local_communicator(), {true, false});
  add(engine_.cross_node_communicator(), {true, true});
  add(engine_.hpz_communicator(), {true, false});
  return b;
}

void LinkMeter::start() { at_start_ = read(); }

StepBytes LinkMeter::stop() {
  const StepBytes now = read();
  StepBytes d;
  d.total = now.total - at_start_.total;
  if (now.intra >= 0 && at_start_.intra >= 0) {
    d.intra = now.intra - at_start_.intra;
    d.inter = now.inter - at_start_.inter;
  }
  return d;
}

}  // namespace zs::train
