#include "spiral_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <string>

#include <zeroshard/core/convert.h>

namespace spiral {
namespace {

// A 64-bit mix of (index, salt) into [0, 1): deterministic "randomness" for the data.
double uniform(int64_t index, uint64_t salt) {
  uint64_t h = static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull + salt * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// A parameter's values in fp32. The views are in the engine's compute dtype (fp32, bf16 or fp16;
// EngineConfig::precision) and valid only during the call: copy what the unit needs.
std::vector<float> as_fp32(const zs::ParamView& p) {
  std::vector<float> out(static_cast<size_t>(p.numel));
  zs::convert(p.data, p.dtype, out.data(), zs::DType::kF32, out.size());
  return out;
}

// y = x W^T + b for x (B, in), W (out, in), b (out): the affine map both units start with.
void affine(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
            int batch, int in, int out, std::vector<float>& y) {
  for (int s = 0; s < batch; ++s)
    for (int o = 0; o < out; ++o) {
      float z = b[o];
      for (int i = 0; i < in; ++i) z += x[s * in + i] * w[o * in + i];
      y[s * out + o] = z;
    }
}

// Given dz = dLoss/dy of the affine map: adds dW += dz^T x and db += sum_s dz into the engine's
// gradient spans, and writes dx = dz W.
void affine_backward(const std::vector<float>& x, const std::vector<float>& w,
                     const std::vector<float>& dz, int batch, int in, int out, zs::GradViews& grads,
                     std::vector<float>& dx) {
  // grads.grad(i): the fp32 gradient of parameter i, zeroed by the engine; units add to it.
  float* dw = grads.grad(0);
  float* db = grads.grad(1);
  for (int s = 0; s < batch; ++s)
    for (int o = 0; o < out; ++o) {
      const float g = dz[s * out + o];
      db[o] += g;
      for (int i = 0; i < in; ++i) dw[o * in + i] += g * x[s * in + i];
    }
  for (int s = 0; s < batch; ++s)
    for (int i = 0; i < in; ++i) {
      float acc = 0.0f;
      for (int o = 0; o < out; ++o) acc += dz[s * out + o] * w[o * in + i];
      dx[s * in + i] = acc;
    }
}

// The parameters of an affine map: W (out, in) drawn from N(0, 1/in), b (out) zero and without
// weight decay. The engine initialises them from these specs, identically for every world size.
std::vector<zs::ParamSpec> affine_specs(int in, int out) {
  const float std = 1.0f / std::sqrt(static_cast<float>(in));
  return {{"weight", {out, in}, zs::Init::normal(0.0f, std), /*weight_decay=*/true},
          {"bias", {out}, zs::Init::zeros(), /*weight_decay=*/false}};
}

// Unit `index`: act[index + 1] = tanh(act[index] W^T + b).
class DenseTanhUnit : public zs::Unit {
 public:
  DenseTanhUnit(SpiralModel& m, int index, int in, int out)
      : m_(m), index_(index), in_(in), out_(out) {}
  std::string name() const override { return "hidden." + std::to_string(index_); }
  std::vector<zs::ParamSpec> param_specs() const override { return affine_specs(in_, out_); }

  void forward(std::span<const zs::ParamView> params, const zs::StepInfo&) override {
    std::vector<float>& y = m_.act[index_ + 1];
    affine(m_.act[index_], as_fp32(params[0]), as_fp32(params[1]), m_.shape.batch, in_, out_, y);
    for (float& v : y) v = std::tanh(v);
  }

  // Runs after the next unit's backward, which left dLoss/d(our output) in dact[index + 1].
  void backward(std::span<const zs::ParamView> params, zs::GradViews& grads,
                const zs::StepInfo&) override {
    const std::vector<float>& y = m_.act[index_ + 1];
    const std::vector<float>& dy = m_.dact[index_ + 1];
    std::vector<float> dz(y.size());
    for (size_t k = 0; k < y.size(); ++k) dz[k] = dy[k] * (1.0f - y[k] * y[k]);  // tanh'
    affine_backward(m_.act[index_], as_fp32(params[0]), dz, m_.shape.batch, in_, out_, grads,
                    m_.dact[index_]);
  }

 private:
  SpiralModel& m_;
  int index_, in_, out_;
};

// The last unit: logits = act[index] W^T + b, then the softmax cross-entropy loss against the
// labels. [The loss contract] forward sets the model's loss to the mean over the micro-batch;
// backward seeds the gradient with StepInfo::loss_scale, so dLoss/dlogits is
// loss_scale * (softmax - onehot) / B. The engine divides the summed gradients by
// loss_scale * ranks * micro_batches: the update follows the mean loss of the global batch.
class SoftmaxHeadUnit : public zs::Unit {
 public:
  SoftmaxHeadUnit(SpiralModel& m, int index, int in) : m_(m), index_(index), in_(in) {}
  std::string name() const override { return "head"; }
  std::vector<zs::ParamSpec> param_specs() const override { return affine_specs(in_, kClasses); }

  void forward(std::span<const zs::ParamView> params, const zs::StepInfo&) override {
    const int batch = m_.shape.batch;
    std::vector<float>& logits = m_.act[index_ + 1];
    affine(m_.act[index_], as_fp32(params[0]), as_fp32(params[1]), batch, in_, kClasses, logits);
    probs_.resize(logits.size());
    double loss = 0.0;
    int correct = 0;
    for (int s = 0; s < batch; ++s) {
      const float* z = &logits[s * kClasses];
      const float top = *std::max_element(z, z + kClasses);
      double sum = 0.0;
      for (int c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(z[c] - top));
      for (int c = 0; c < kClasses; ++c)
        probs_[s * kClasses + c] = static_cast<float>(std::exp(z[c] - top) / sum);
      const int label = m_.labels[s];
      loss -= static_cast<double>(z[label] - top) - std::log(sum);
      correct += static_cast<int>(std::max_element(z, z + kClasses) - z) == label;
    }
    m_.loss_ = loss / batch;  // the mean over the micro-batch
    m_.correct_ = correct;
  }

  void backward(std::span<const zs::ParamView> params, zs::GradViews& grads,
                const zs::StepInfo& info) override {
    const int batch = m_.shape.batch;
    std::vector<float> dz(probs_.size());
    for (int s = 0; s < batch; ++s)
      for (int c = 0; c < kClasses; ++c) {
        const float onehot = c == m_.labels[s] ? 1.0f : 0.0f;
        dz[s * kClasses + c] = info.loss_scale * (probs_[s * kClasses + c] - onehot) / batch;
      }
    affine_backward(m_.act[index_], as_fp32(params[0]), dz, batch, in_, kClasses, grads,
                    m_.dact[index_]);
  }

 private:
  SpiralModel& m_;
  int index_, in_;
  std::vector<float> probs_;  // (B, classes) softmax of the last forward
};

}  // namespace

void make_sample(int64_t index, float* point, int* label) {
  // Arm c of 3, a point at t in [0, 1) along it: radius t, angle 2 pi c / 3 + 4 t, plus noise.
  const int c = static_cast<int>(index % kClasses);
  const double t = uniform(index, 1);
  const double angle =
      2.0 * std::numbers::pi * c / kClasses + 4.0 * t + 0.2 * (uniform(index, 2) - 0.5);
  point[0] = static_cast<float>(t * std::cos(angle));
  point[1] = static_cast<float>(t * std::sin(angle));
  *label = c;
}

SpiralModel::SpiralModel(const Shape& s) : shape(s) {
  units_.push_back(std::make_unique<DenseTanhUnit>(*this, 0, kInputs, s.hidden));
  units_.push_back(std::make_unique<DenseTanhUnit>(*this, 1, s.hidden, s.hidden));
  units_.push_back(std::make_unique<SoftmaxHeadUnit>(*this, 2, s.hidden));
  // Activations are sized once, for one micro-batch, and reused (the engine allocates nothing
  // during a step either).
  const size_t b = static_cast<size_t>(s.batch);
  act = {std::vector<float>(b * kInputs), std::vector<float>(b * s.hidden),
         std::vector<float>(b * s.hidden), std::vector<float>(b * kClasses)};
  dact = act;
  labels.resize(b);
}

void SpiralModel::load_micro_batch(int m) {
  // Step s, micro-batch m holds batch * world samples; rank r takes the r-th share of them.
  const int64_t per_micro_batch = static_cast<int64_t>(shape.batch) * shape.world;
  const int64_t first = (step_ * shape.micro_batches + m) * per_micro_batch +
                        static_cast<int64_t>(shape.rank) * shape.batch;
  load_samples(first);
}

void SpiralModel::load_samples(int64_t first) {
  for (int s = 0; s < shape.batch; ++s) make_sample(first + s, &act[0][s * kInputs], &labels[s]);
}

}  // namespace spiral
