#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace zs::optim {

float LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step <= warmup_steps) {
    return lr * static_cast<float>(step) / static_cast<float>(warmup_steps);
  }
  if (total_steps <= warmup_steps) return lr;
  const double progress = std::clamp(
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps),
      0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  const double min_lr = static_cast<double>(lr) * min_ratio;
  return static_cast<float>(min_lr + (lr - min_lr) * cosine);
}

}  // namespace zs::optim
