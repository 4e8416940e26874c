// The dynamic loss scaler's policy (fp16 compute). It decides; the engine finds overflow (one
// all-reduce of a flag over every rank's shards) and reports it here.
//
// Policy: start at `initial`; after `growth_interval` consecutive overflow-free steps multiply
// by `growth`; on an overflow the step is skipped and, once `hysteresis` overflows have been seen
// since the last growth or back-off, multiply by `backoff` (never below `min_scale`).
// A static scaler (dynamic = false) keeps `initial` (bf16/fp32 default: 1) and never changes it;
// a step whose gradient is not finite is still skipped (update() returns false), never applied.
#pragma once

#include <cstdint>

namespace zs::optim {

struct LossScalerConfig {
  bool dynamic = false;
  float initial = 65536.0f;
  float growth = 2.0f;
  float backoff = 0.5f;
  int64_t growth_interval = 2000;
  float min_scale = 1.0f;
  int hysteresis = 1;
};

// Everything a checkpoint must save to resume the scaler bitwise.
struct LossScalerState {
  float scale = 1.0f;
  int64_t good_steps = 0;
  int hysteresis_left = 1;
};

// Thread-safety: none needed; owned by the engine.
class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& cfg);
  float scale() const { return state_.scale; }
  // Records the outcome of a step; returns true when the step must be applied (no overflow).
  bool update(bool overflow);
  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& s) { state_ = s; }

 private:
  LossScalerConfig cfg_;
  LossScalerState state_;
};

}  // namespace zs::optim
