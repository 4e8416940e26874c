// A small deep MLP built from engine units, for the engine's tests: hidden units
// y = tanh(x W^T + b), a head z = x W^T + b with a mean-squared-error loss. Data is a pure
// function of the global sample index, so any world size and micro-batch split sees the same
// global batch: rank r's micro-batch m of step s holds samples
//   s * global_batch + m * (world * b) + r * b + [0, b),  b = global_batch / (world *
//   micro_batches).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "unit/unit.h"

namespace zs::testing {

struct MlpShape {
  int hidden_layers = 4;
  int in = 13;
  int width = 20;
  int out = 3;
  int global_batch = 8;
  // Frozen parameters (ParamSpec::trainable = false): bit 2u freezes unit u's weight, bit 2u + 1
  // its bias. A frozen parameter's gradient is not computed (GradViews::wanted).
  uint32_t frozen_mask = 0;
  // Makes unit 0's backward ask for its weight's gradient even when it is frozen (to test the
  // engine's error).
  bool ask_frozen_grad = false;
  // The weights declare ParamSpec::accepts_int8 (the units read every view through at(), which
  // takes int8 records too).
  bool accepts_int8 = false;
  // The hidden units' names: "<hidden_name>.<index>" ("block" makes their weights Muon's, [Note:
  // Muon parameters] in runtime/engine_config.h).
  std::string hidden_name = "hidden";
};

class MlpModel : public Model {
 public:
  MlpModel(const MlpShape& shape, int world, int rank, int micro_batches);
  size_t num_units() const override { return units_.size(); }
  Unit& unit(size_t i) override { return *units_[i]; }
  void load_micro_batch(int index) override;
  double loss() const override { return loss_; }

  void set_step(int64_t step) { step_ = step; }
  // Makes the head's backward write +inf into its weight gradient on `rank` for micro-batch 0.
  void poison_next_backward(bool on) { poison_ = on; }
  // Makes hidden unit 0 skip writing its bias gradient (to test the engine's check).
  void drop_gradient(bool on) { drop_ = on; }
  // Makes unit `unit`'s backward (micro-batch 0, every rank) write NaN into its weight gradient
  // and its input gradient, so that every unit before it gets NaN too; -1 turns it off.
  void poison_backward_from(int unit) { poison_from_ = unit; }
  // Makes the head's forward report a NaN loss (as diverged parameters would).
  void poison_loss(bool on) { poison_loss_ = on; }

  // Shared state the units read and write.
  int b = 0;                          // samples per micro-batch
  std::vector<std::vector<float>> x;  // activations: x[0] input, x[u+1] output of unit u
  std::vector<std::vector<float>> dx;
  std::vector<float> target;
  double loss_ = 0.0;
  bool poison_ = false;
  bool drop_ = false;
  int poison_from_ = -1;
  bool poison_loss_ = false;
  MlpShape shape;

 private:
  int world_, rank_, micro_batches_;
  int64_t step_ = 0;
  std::vector<std::unique_ptr<Unit>> units_;
};

}  // namespace zs::testing
