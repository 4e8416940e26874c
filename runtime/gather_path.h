// How one group's sharded parameters (stage 3) reach a gather slot ([Note: communication paths]
// in runtime/comm_path.h). ParamGroup starts and finishes a gather through its path; the buffer
// plan sizes the slots and the kept bytes by asking it; the communication model asks it for the
// step's calls.
//
//   plain       all-gather of the compute-dtype shards (runtime/paths/plain_gather.cc)
//   qwZ         each rank's shard as int8 codes and fp32 block scales, gathered into the slot's
//               chunk area and decoded ([Note: quantized weights]; paths/quantized_gather_path.cc)
//   hpZ over X  the step's first gather goes over the world by X; later ones all-gather the
//               secondary shard kept from it within the hpZ group ([Note: hpZ];
//               paths/secondary_gather.cc)
//
// A path is made for one group's layout and rank; its planning queries work without
// communicators (the planner's paths never connect). Collective: start(); every rank of the
// group's communicators calls it in the same order. Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "runtime/comm_path.h"
#include "runtime/quantized_gather.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"

namespace zs {

class GatherPath {
 public:
  virtual ~GatherPath() = default;
  // "plain", "qwZ", "hpZ over plain", ...
  virtual std::string name() const = 0;
  // Where a gather slot of this group puts the parameters (at 0), the frozen bytes and the
  // path's own area, and the slot's size.
  virtual GatherSlotLayout slot_layout() const = 0;
  // Bytes the group keeps besides its shard (MemCategory::kParams), and how many of them are
  // padding (the plan's padding share).
  virtual int64_t kept_bytes() const { return 0; }
  virtual int64_t kept_padding_bytes() const { return 0; }
  // The step's calls of this group's trainable-parameter gathers when it is gathered `visits`
  // times in the step.
  virtual void step_calls(int64_t visits, std::vector<PathCall>& out) const = 0;

  // The engine's communicators and the kept buffer (kept_bytes()); once, before any start.
  virtual void connect(const PathComms& comms, Buffer kept) = 0;
  // Starts gathering this rank's shard `shard` (compute dtype, the layout's shard_numel elements)
  // into `slot` (slot_layout().bytes): the parameters land at its offset 0.
  virtual WorkHandle start(const void* shard, void* slot) = 0;
  // The Work start() returned has completed: makes the slot's parameters final (decodes, keeps).
  virtual void finish(void* /*slot*/) {}
  // The parameters may have changed since the last gather (a new step or evaluation).
  virtual void invalidate() {}
};

// The path of a group with layout `l` (its world is the shard group) and frozen layout `f` on
// shard-group rank `rank`, as the registry (runtime/paths/registry.cc) chooses it for `c`.
std::unique_ptr<GatherPath> make_gather_path(const PathConfig& c, const GroupLayout& l,
                                             const FrozenLayout& f, int rank);

}  // namespace zs
