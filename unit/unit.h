// The unit interface: how a model (ours or a trainer's own) plugs into the engine.
//
// A model is an ordered list of units; a unit is the granularity of gathering (one layer or
// block). A unit declares its parameters and implements forward and backward over full
// (gathered) parameter views in the compute dtype. The engine owns every parameter byte: it lays
// them out in flat groups, initialises, gathers, releases, reduces and updates them. Activations
// are the model's own business: units pass them to each other through the model object.
//
// [Note: loss scaling and averaging] The last unit computes the loss of its micro-batch (a mean
// over the micro-batch) in forward, and its backward seeds the gradient with
// StepInfo::loss_scale (the derivative of the scaled loss). The engine sums gradients over ranks
// and micro-batches and divides by (loss_scale * ranks * micro_batches) when it applies them, so
// the update follows the mean loss over the global batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/dtype.h"
#include "core/error.h"
#include "unit/activation_plan.h"

namespace zs {

// How a parameter's initial values are drawn. The draw for element i of a parameter depends only
// on (seed, unit index, parameter index, i): every world size and stage starts from the same
// values.
struct Init {
  enum class Kind { kZeros, kOnes, kConstant, kNormal, kUniform };
  Kind kind = Kind::kZeros;
  float a = 0.0f;  // constant: the value; normal: mean; uniform: low
  float b = 0.0f;  // normal: standard deviation; uniform: high
  static Init zeros() { return {}; }
  static Init ones() { return {Kind::kOnes, 1.0f, 0.0f}; }
  static Init constant(float v) { return {Kind::kConstant, v, 0.0f}; }
  static Init normal(float mean, float std) { return {Kind::kNormal, mean, std}; }
  static Init uniform(float lo, float hi) { return {Kind::kUniform, lo, hi}; }
};

struct ParamSpec {
  std::string name;            // unique within its unit, e.g. "weight"
  std::vector<int64_t> shape;  // row-major; numel is the product
  Init init;
  bool weight_decay = true;  // false for biases and norms, typically
  // [Note: frozen parameters] A parameter that is not trainable (a fine-tuning base) has no
  // gradient buffer, no fp32 master and no optimizer state, and is never reduced; it is still
  // sharded (stage 3) and gathered for compute like any other. Its storage dtype is the engine's
  // EngineConfig::frozen_dtype (the compute dtype, or int8 with one scale per row for matrices);
  // the unit always sees it in the compute dtype. A unit may mix frozen and trainable parameters,
  // or hold only frozen ones (its backward is still called, to pass gradients to the units
  // before it).
  // With int8 storage, a frozen matrix whose spec sets accepts_int8 may be handed to the unit as
  // its int8 record instead, without dequantizing it, when EngineConfig::frozen.int8_compute says
  // so (FrozenPolicy::hands_int8(), runtime/engine_config.h): its ParamView then has dtype kI8,
  // data pointing at the rows * cols int8 values and row_scales at the rows fp32 scales (row =
  // the first dimension; value = q * scale). A unit that sets accepts_int8 must compute from
  // either form (nn::Int8Linear, nn/int8_linear.h, does); the flag is ignored for trainable
  // parameters, other shapes and other storage.
  bool trainable = true;
  bool accepts_int8 = false;
  // [Note: tied parameters] A parameter may be another unit's (tied input and output embeddings):
  // `tied_to` names a parameter of an earlier unit, by unit index and name, of the same shape. It
  // is one parameter, laid out, initialised, sharded, updated and checkpointed once, as the
  // owner's: the owner's spec decides trainable, init, weight decay and storage, and this spec's
  // copies of those fields are ignored (except that a borrower must set accepts_int8 when the
  // owner does: it is handed the owner's form). The borrower's view is the owner's values, and its
  // backward adds (+=) into a span that becomes the start of the owner's gradient: the owner's
  // backward, which runs later (units go in reverse), adds its own contribution to it. That order
  // is the same at every stage. In stage 3 the owner's group stays gathered from its forward visit
  // to its backward visit (one more gather slot, as FSDP keeps tied weights in its root unit),
  // and the borrower's contribution waits in an fp32 buffer of the parameter's size.
  struct TiedTo {
    int unit = -1;      // the owner unit (< this unit), -1: not tied
    std::string param;  // the owner's parameter name
  };
  TiedTo tied_to = {};
  bool tied() const { return tied_to.unit >= 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// [Note: device views] The views point into the memory of the engine's device (DeviceOps in
// device/device_ops.h): host memory on the CPU backend; device memory of the rank's GPU on the
// CUDA backend, where a unit enqueues its kernels on the stream the engine's DeviceOps and
// communicator are ordered on, and must not assume the host can read the views. A model is
// written for one device (nn::GptModel for the CPU, nn::CudaGptModel for CUDA).
//
// A parameter's full values in the compute dtype (fp32, bf16 or fp16), valid during the call; or
// a frozen int8 matrix as its record (dtype kI8, [Note: frozen parameters]).
struct ParamView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t numel = 0;
  const ParamSpec* spec = nullptr;
  const float* row_scales = nullptr;  // dtype kI8 only: one fp32 scale per row; else null
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
  // Element i as fp32 (an int8 record's q * scale of its row, as fp32 dequantization computes it).
  float at(int64_t i) const {
    if (dtype == DType::kI8) {
      return static_cast<float>(as<int8_t>()[i]) * row_scales[i / (numel / spec->shape[0])];
    }
    return load_as_fp32(data, dtype, static_cast<size_t>(i));
  }
};

// Where a unit's backward writes its parameter gradients: one fp32 span per parameter, full size,
// zeroed by the engine before each backward call. Units add (+=) their contributions. Asking for
// a gradient marks it produced; the engine rejects a backward that leaves one unproduced.
// A frozen parameter has no span: wanted(i) is false, the unit must skip computing its gradient,
// and grad(i) throws.
class GradViews {
 public:
  GradViews() = default;
  GradViews(std::vector<float*> spans, std::vector<int64_t> numels)
      : spans_(std::move(spans)), numels_(std::move(numels)), produced_(spans_.size(), 0) {}
  size_t size() const { return spans_.size(); }
  int64_t numel(size_t i) const { return numels_[i]; }
  bool wanted(size_t i) const { return spans_[i] != nullptr; }
  float* grad(size_t i) {
    if (spans_[i] == nullptr) frozen_grad_requested(i);
    produced_[i] = 1;
    return spans_[i];
  }
  bool produced(size_t i) const { return produced_[i] != 0; }
  void clear_produced() { std::fill(produced_.begin(), produced_.end(), 0); }

 private:
  // Inline: the unit interface is header-only (models link no runtime library).
  [[noreturn]] void frozen_grad_requested(size_t i) const {
    fail(ErrorCode::kInvalidArgument,
         "backward asked for the gradient of parameter {}, which is frozen (ParamSpec::trainable "
         "= false): check GradViews::wanted() and skip its gradient",
         i);
  }
  std::vector<float*> spans_;
  std::vector<int64_t> numels_;
  std::vector<char> produced_;
};

struct StepInfo {
  int micro_batch = 0;
  int num_micro_batches = 1;
  float loss_scale = 1.0f;  // see [Note: loss scaling and averaging]
  bool training = true;     // false for evaluation: forward only, no backward follows
};

// Thread-safety: the engine calls a unit from one thread at a time.
class Unit {
 public:
  virtual ~Unit() = default;
  virtual std::string name() const = 0;
  // Called once when the engine is built; the order and shapes must not change afterwards.
  virtual std::vector<ParamSpec> param_specs() const = 0;
  // params[i] corresponds to param_specs()[i].
  virtual void forward(std::span<const ParamView> params, const StepInfo& info) = 0;
  // Called in reverse unit order after the forward of the same micro-batch.
  virtual void backward(std::span<const ParamView> params, GradViews& grads,
                        const StepInfo& info) = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual size_t num_units() const = 0;
  virtual Unit& unit(size_t i) = 0;
  // Called before each micro-batch's forward: load the inputs of micro-batch `index`.
  virtual void load_micro_batch(int index) = 0;
  // The loss of the last forward (unscaled mean over its micro-batch), for reporting. The engine
  // reads it once per micro-batch, after issuing that micro-batch's backward (so a device model
  // may wait for its forward there without idling the device): backward must not change it.
  virtual double loss() const = 0;
  // The activation bytes this model allocated (unit/activation_plan.h), for the memory planner
  // and reports; the engine does not call it. The default says nothing (counted = false): a model
  // that sizes its activations up front overrides it with the figures it allocated from.
  virtual ActivationPlan activation_plan() const { return {}; }
};

}  // namespace zs
