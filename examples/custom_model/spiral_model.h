// A small classifier trained through zeroshard's unit interface: three spiral arms in the plane,
// one class per arm, learned by a multi-layer perceptron
//
//   x (B, 2) -> hidden.0: tanh(x W0^T + b0) (B, H) -> hidden.1: tanh(. W1^T + b1) (B, H)
//            -> head: logits = . W2^T + b2 (B, 3), softmax cross-entropy against the labels
//
// The pieces a model supplies (zeroshard/unit/unit.h):
//   * Units (DenseTanhUnit, SoftmaxHeadUnit in spiral_model.cc): each declares its parameters
//     (ParamSpec: name, shape, initialisation) and computes forward and backward given full views
//     of them. The engine owns the parameter memory; a unit never allocates or updates one.
//   * The model (SpiralModel): the ordered list of units, the activations they pass to each other,
//     and the data: load_micro_batch(m) fills the input and labels of micro-batch m of the step.
//   * The loss contract: the last unit's forward computes the mean loss over its micro-batch, and
//     its backward seeds the gradient with StepInfo::loss_scale (the derivative of loss_scale *
//     loss); the engine averages over micro-batches and ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <zeroshard/unit/unit.h>

namespace spiral {

inline constexpr int kInputs = 2;   // a point (x, y)
inline constexpr int kClasses = 3;  // one class per spiral arm

// Sample `index` of the endless data stream: a pure function of the index, so any rank can make
// any sample and the data does not depend on the world size. `label` receives the arm.
void make_sample(int64_t index, float* point, int* label);

// The per-rank shape of the job. `batch` samples per rank per micro-batch: the global batch of a
// step is batch * micro_batches * world.
struct Shape {
  int hidden = 64;
  int batch = 32;
  int micro_batches = 1;
  int world = 1;
  int rank = 0;
};

// Thread-safety: one thread at a time (the engine's rule for models).
class SpiralModel : public zs::Model {
 public:
  explicit SpiralModel(const Shape& shape);

  // zs::Model.
  size_t num_units() const override { return units_.size(); }
  zs::Unit& unit(size_t i) override { return *units_[i]; }
  // Rank r's share of micro-batch m of the current step (set_step): `batch` consecutive samples
  // of the stream, the ranks' shares side by side. Called by Engine::step() before each forward.
  void load_micro_batch(int m) override;
  double loss() const override { return loss_; }

  // The step whose data load_micro_batch reads (the engine does not tell the model).
  void set_step(int64_t step) { step_ = step; }
  // For evaluation: loads `batch` samples starting at `first` (held-out data lives at indices
  // no training step reaches); then Engine::forward() computes loss() and correct().
  void load_samples(int64_t first);
  // Samples of the last forward whose arg-max logit was the label.
  int correct() const { return correct_; }

  // State the units share. act[0] is the input (B, 2), act[u + 1] the output of unit u; dact[u]
  // the gradient of the loss with respect to act[u], written by unit u's backward.
  const Shape shape;
  std::vector<std::vector<float>> act;
  std::vector<std::vector<float>> dact;
  std::vector<int> labels;  // (B)
  double loss_ = 0.0;
  int correct_ = 0;

 private:
  int64_t step_ = 0;
  std::vector<std::unique_ptr<zs::Unit>> units_;
};

}  // namespace spiral
