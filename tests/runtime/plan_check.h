// The memory planner against an engine's tracker, for the engine's tests: what every test of a
// new buffer checks (the plan and the allocation agree to the byte, category by category).
#pragma once

#include <initializer_list>

#include <gtest/gtest.h>

#include "planner/memory_plan.h"
#include "unit/unit.h"

namespace zs::testing {

// plan_memory() for `model` under `c` at `world` ranks, from `rank`'s view, equals `tracker`'s
// current bytes in each of `cats` (a failure names the category).
inline void expect_plan_equals_tracker(Model& model, const EngineConfig& c, int world, int rank,
                                       const MemoryTracker& tracker,
                                       std::initializer_list<MemCategory> cats) {
  PlanConfig pc;
  pc.engine = c;
  pc.world = world;
  pc.rank = rank;
  const MemoryPlan plan = plan_memory(ModelDesc::from_model(model), pc);
  for (MemCategory cat : cats) {
    EXPECT_EQ(plan.bytes(cat), tracker.current(cat)) << mem_category_name(cat);
  }
}

}  // namespace zs::testing
