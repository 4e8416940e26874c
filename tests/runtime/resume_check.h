// Bitwise resume, for the engine's tests: a run of `steps` steps against one that saves a
// checkpoint after step `save_after`, and a fresh engine that loads it and takes the rest.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "mlp_model.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs::testing {

// Trains the test MLP under `c` for `steps` steps, saving after step `save_after` into a fresh
// directory named from `prefix`; a new engine resumes from that checkpoint and finishes. Expects
// the same param_hash. Collective over world().
inline void expect_resume_bitwise(const EngineConfig& c, const std::string& prefix, int steps = 5,
                                  int save_after = 1, const MlpShape& shape = {}) {
  const std::string dir = shared_temp_dir(prefix);
  MlpModel straight_model(shape, world().size(), world().rank(), 1);
  Engine straight(straight_model, world(), c);
  std::string path;
  for (int s = 0; s < steps; ++s) {
    straight_model.set_step(s);
    straight.step();
    if (s == save_after) path = save_checkpoint(straight, world(), dir);
  }
  MlpModel resumed_model(shape, world().size(), world().rank(), 1);
  Engine resumed(resumed_model, world(), c);
  load_checkpoint(resumed, world(), path);
  for (int s = save_after + 1; s < steps; ++s) {
    resumed_model.set_step(s);
    resumed.step();
  }
  EXPECT_EQ(resumed.param_hash(), straight.param_hash());
}

}  // namespace zs::testing
