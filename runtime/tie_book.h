// The engine's bookkeeping of tied parameters ([Note: tied parameters] in unit/unit.h) during a
// step: each tie's fp32 gradient buffer, the ties per borrower and per owner group, and each
// group's views while it is acquired (what a borrower is handed).
//
// A borrower's views of a tied parameter point at the owner's values, which stay valid while the
// borrower computes (the owner comes earlier and is resident or held by the gather schedule). A
// borrower's backward adds its contribution to the tie's gradient buffer (the borrowers come
// later in the forward, so earlier in the backward); the owner's gradient starts from it.
// Thread-safety: one thread (the engine's).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "device/device_ops.h"
#include "runtime/param_group.h"
#include "runtime/tied_params.h"

namespace zs {

class TieBook {
 public:
  TieBook() = default;
  explicit TieBook(std::vector<TiedParam> ties) : ties_(std::move(ties)) {}

  const std::vector<TiedParam>& ties() const { return ties_; }
  // Allocates each trainable tie's gradient buffer (MemCategory::kCommBuffers, 4 * numel bytes:
  // the plan's tied_grad_bytes) and hands it to its borrower group. Once, after the groups exist.
  void connect(std::span<ParamGroup> groups, DeviceOps& ops, MemoryTracker* tracker);
  // Group g was acquired with `views`: its tied parameters now point at their owners' values.
  void acquired(ParamGroup& g, std::span<const ParamView> views);
  // A backward begins: the ties' gradient buffers are zeroed (the borrowers add into them).
  void begin_backward();
  // The owner's gradient, in the fp32 `scratch` of the whole group, starts from its borrowers'
  // contributions (added to what is there).
  void seed_owner(const ParamGroup& owner, float* scratch);

 private:
  std::vector<TiedParam> ties_;
  DeviceOps* ops_ = nullptr;
  std::vector<Buffer> grads_;  // per tie; empty when the owner is frozen
  std::vector<std::vector<size_t>> of_borrower_, of_owner_;  // tie indices per group
  std::vector<std::span<const ParamView>> current_;          // per group, while acquired
};

}  // namespace zs
