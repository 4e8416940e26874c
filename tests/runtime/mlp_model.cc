#include "mlp_model.h"

namespace zs::testing {

namespace {

float sample_value(int64_t sample, int j, uint64_t salt) {
  uint64_t h =
      static_cast<uint64_t>(sample) * 0x9e3779b97f4a7c15ull + j * 0xbf58476d1ce4e5b9ull + salt;
  h ^= h >> 29;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 32;
  return static_cast<float>(h % 20001) / 10000.0f - 1.0f;
}

// Dense layer over the model's activations; tanh unless it is the head.
class DenseUnit : public Unit {
 public:
  DenseUnit(MlpModel& m, int index, int in, int out, bool head)
      : m_(m), index_(index), in_(in), out_(out), head_(head) {}
  std::string name() const override {
    return head_ ? "head" : m_.shape.hidden_name + "." + std::to_string(index_);
  }
  std::vector<ParamSpec> param_specs() const override {
    const float std = 1.0f / std::sqrt(static_cast<float>(in_));
    std::vector<ParamSpec> s = {{"weight", {out_, in_}, Init::normal(0.0f, std), true},
                                {"bias", {out_}, Init::uniform(-0.1f, 0.1f), false}};
    s[0].trainable = !(m_.shape.frozen_mask >> (2 * index_) & 1u);
    s[1].trainable = !(m_.shape.frozen_mask >> (2 * index_ + 1) & 1u);
    s[0].accepts_int8 = m_.shape.accepts_int8;
    return s;
  }
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    const auto& xin = m_.x[index_];
    auto& y = m_.x[index_ + 1];
    for (int s = 0; s < m_.b; ++s) {
      for (int o = 0; o < out_; ++o) {
        float z = p[1].at(o);
        for (int i = 0; i < in_; ++i) z += xin[s * in_ + i] * p[0].at(o * in_ + i);
        y[s * out_ + o] = head_ ? z : std::tanh(z);
      }
    }
    if (head_) {
      double l = 0.0;
      for (int k = 0; k < m_.b * out_; ++k) {
        const double d = y[k] - m_.target[k];
        l += 0.5 * d * d;
      }
      m_.loss_ = m_.poison_loss_ ? std::numeric_limits<double>::quiet_NaN() : l / (m_.b * out_);
    }
  }
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override {
    const auto& xin = m_.x[index_];
    const auto& y = m_.x[index_ + 1];
    std::vector<float> dz(static_cast<size_t>(m_.b) * out_);
    for (int k = 0; k < m_.b * out_; ++k) {
      if (head_) {
        dz[k] = info.loss_scale * (y[k] - m_.target[k]) / static_cast<float>(m_.b * out_);
      } else {
        dz[k] = m_.dx[index_ + 1][k] * (1.0f - y[k] * y[k]);
      }
    }
    float* gw = nullptr;
    if (g.wanted(0) || (m_.shape.ask_frozen_grad && index_ == 0)) {
      gw = g.grad(0);
      for (int s = 0; s < m_.b; ++s)
        for (int o = 0; o < out_; ++o)
          for (int i = 0; i < in_; ++i) gw[o * in_ + i] += dz[s * out_ + o] * xin[s * in_ + i];
    }
    if (!(m_.drop_ && index_ == 0) && g.wanted(1)) {
      float* gb = g.grad(1);
      for (int s = 0; s < m_.b; ++s)
        for (int o = 0; o < out_; ++o) gb[o] += dz[s * out_ + o];
    }
    if (head_ && m_.poison_ && info.micro_batch == 0 && gw)
      gw[0] = std::numeric_limits<float>::infinity();
    auto& dxin = m_.dx[index_];
    for (int s = 0; s < m_.b; ++s)
      for (int i = 0; i < in_; ++i) {
        float acc = 0.0f;
        for (int o = 0; o < out_; ++o) acc += dz[s * out_ + o] * p[0].at(o * in_ + i);
        dxin[s * in_ + i] = acc;
      }
    if (m_.poison_from_ == index_ && info.micro_batch == 0 && gw) {
      gw[0] = std::numeric_limits<float>::quiet_NaN();
      if (index_ > 0) dxin[0] = std::numeric_limits<float>::quiet_NaN();
    }
  }

 private:
  MlpModel& m_;
  int index_, in_, out_;
  bool head_;
};

}  // namespace

MlpModel::MlpModel(const MlpShape& s, int world, int rank, int micro_batches)
    : shape(s), world_(world), rank_(rank), micro_batches_(micro_batches) {
  b = s.global_batch / (world * micro_batches);
  int in = s.in;
  for (int l = 0; l < s.hidden_layers; ++l) {
    units_.push_back(std::make_unique<DenseUnit>(*this, l, in, s.width, false));
    in = s.width;
  }
  units_.push_back(std::make_unique<DenseUnit>(*this, s.hidden_layers, in, s.out, true));
  x.push_back(std::vector<float>(static_cast<size_t>(b) * s.in));
  for (int l = 0; l < s.hidden_layers; ++l)
    x.push_back(std::vector<float>(static_cast<size_t>(b) * s.width));
  x.push_back(std::vector<float>(static_cast<size_t>(b) * s.out));
  dx = x;
  target.resize(static_cast<size_t>(b) * s.out);
}

void MlpModel::load_micro_batch(int m) {
  const int64_t first = step_ * shape.global_batch + static_cast<int64_t>(m) * world_ * b +
                        static_cast<int64_t>(rank_) * b;
  for (int s = 0; s < b; ++s) {
    for (int j = 0; j < shape.in; ++j) x[0][s * shape.in + j] = sample_value(first + s, j, 1);
    for (int j = 0; j < shape.out; ++j)
      target[s * shape.out + j] = 0.5f * sample_value(first + s, j, 2);
  }
}

}  // namespace zs::testing
