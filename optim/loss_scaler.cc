#include "optim/loss_scaler.h"

#include <algorithm>

namespace zs::optim {

LossScaler::LossScaler(const LossScalerConfig& cfg) : cfg_(cfg) {
  state_.scale = cfg.dynamic ? cfg.initial : (cfg.initial > 0 ? cfg.initial : 1.0f);
  state_.hysteresis_left = std::max(1, cfg.hysteresis);
}

bool LossScaler::update(bool overflow) {
  if (!cfg_.dynamic) return !overflow;
  if (overflow) {
    state_.good_steps = 0;
    if (--state_.hysteresis_left <= 0) {
      state_.scale = std::max(cfg_.min_scale, state_.scale * cfg_.backoff);
      state_.hysteresis_left = std::max(1, cfg_.hysteresis);
    }
    return false;
  }
  if (++state_.good_steps >= cfg_.growth_interval) {
    state_.scale *= cfg_.growth;
    state_.good_steps = 0;
    state_.hysteresis_left = std::max(1, cfg_.hysteresis);
  }
  return true;
}

}  // namespace zs::optim
