// Learning-rate schedule: linear warm-up from 0 to `lr` over `warmup_steps`, then cosine decay to
// `lr * min_ratio` at `total_steps`, constant after. Steps are 1-based (the step being taken).
#pragma once

#include <cstdint>

namespace zs::optim {

struct LrSchedule {
  float lr = 3e-4f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // 0: no decay after warm-up
  float min_ratio = 0.1f;

  float at(int64_t step) const;
};

}  // namespace zs::optim
