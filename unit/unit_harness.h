// A single-rank driver of a zs::Model's units without the engine, for unit tests and benchmarks of
// models: owns the parameters and gradients of the units and drives them by hand (forward over
// all units, backward in reverse with zeroed GradViews), as the engine would for one rank without
// sharding. fp32 master values, converted to the compute dtype for the views. With `frozen`, a
// parameter whose spec is not trainable gets no gradient span (GradViews::wanted() false, as the
// engine gives it; its grad() stays zero and sgd() leaves it unchanged); without, every parameter
// gets one. A tied parameter ([Note: tied parameters] in unit/unit.h) is its owner's: its view is
// the owner's, its backward adds into the owner's gradient (before the owner's backward, as in the
// engine), and master()/grad() of either name the owner's values. Header-only; depends on the
// unit interface and core only.
//
// Thread-safety: one thread at a time.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/convert.h"
#include "core/quantize.h"
#include "unit/unit.h"

namespace zs {

class UnitHarness {
 public:
  // Every parameter initialised from its spec's Init with a generator seeded by `seed`; the
  // views in `compute` dtype. The model must outlive the harness.
  UnitHarness(Model& model, DType compute, uint64_t seed, bool frozen = false)
      : model_(model), dtype_(compute) {
    std::mt19937_64 rng(seed);
    units_.resize(model.num_units());
    for (size_t u = 0; u < units_.size(); ++u) {
      UnitState& st = units_[u];
      st.specs = model.unit(u).param_specs();
      for (size_t i = 0; i < st.specs.size(); ++i) st.owner.push_back(owner_of(u, i));
      for (const ParamSpec& s : st.specs) {
        std::vector<float> v(s.numel());
        std::normal_distribution<float> nd(s.init.a, s.init.b);
        std::uniform_real_distribution<float> ud(s.init.a, s.init.b);
        for (float& x : v) {
          switch (s.init.kind) {
            case Init::Kind::kZeros:
              x = 0.0f;
              break;
            case Init::Kind::kOnes:
              x = 1.0f;
              break;
            case Init::Kind::kConstant:
              x = s.init.a;
              break;
            case Init::Kind::kNormal:
              x = nd(rng);
              break;
            case Init::Kind::kUniform:
              x = ud(rng);
              break;
          }
        }
        st.master.push_back(std::move(v));
        st.grads.emplace_back(s.numel(), 0.0f);
        st.lowp.emplace_back(dtype_ == DType::kF32 ? 0 : s.numel());
      }
      std::vector<float*> spans;
      std::vector<int64_t> numels;
      for (size_t i = 0; i < st.grads.size(); ++i) {
        const auto [ou, oi] = st.owner[i];
        const bool trainable = units_[ou].specs[oi].trainable;
        spans.push_back(frozen && !trainable ? nullptr : units_[ou].grads[oi].data());
        numels.push_back(static_cast<int64_t>(st.grads[i].size()));
      }
      st.grad_views = GradViews(spans, numels);
    }
    refresh();
  }

  // int8 storage of the frozen matrices that accept it ([Note: int8 compute] in
  // runtime/engine_config.h): each quantized per row (core/quantize.h); raw: handed over as its
  // record (dtype kI8 + row scales), else dequantized into the compute dtype as the engine does.
  void set_int8(bool raw) {
    int8_ = true;
    raw_ = raw;
    refresh();
  }
  // Re-derives the compute-dtype views from the fp32 master values.
  void refresh() {
    for (UnitState& st : units_) {
      st.views.clear();
      st.q.resize(st.specs.size());
      st.scales.resize(st.specs.size());
      for (size_t i = 0; i < st.specs.size(); ++i) {
        if (st.specs[i].tied()) {  // the owner's view (an earlier unit's, already made)
          const auto [ou, oi] = st.owner[i];
          st.views.push_back(units_[ou].views[oi]);
          st.views.back().spec = &st.specs[i];
          continue;
        }
        ParamView v;
        v.dtype = dtype_;
        v.numel = st.specs[i].numel();
        v.spec = &st.specs[i];
        const ParamSpec& sp = st.specs[i];
        if (int8_ && !sp.trainable && sp.accepts_int8 && sp.shape.size() == 2) {
          const size_t rows = static_cast<size_t>(sp.shape[0]),
                       cols = static_cast<size_t>(sp.shape[1]);
          st.q[i].resize(rows * cols);
          st.scales[i].resize(rows);
          quantize_int8_rows(st.master[i].data(), rows, cols, st.q[i].data(), st.scales[i].data());
          if (raw_) {
            v.dtype = DType::kI8;
            v.data = st.q[i].data();
            v.row_scales = st.scales[i].data();
          } else {
            st.deq32.resize(st.specs.size());
            st.deq32[i].resize(dtype_ == DType::kF32 ? rows * cols : 0);
            void* out = dtype_ == DType::kF32 ? static_cast<void*>(st.deq32[i].data())
                                              : static_cast<void*>(st.lowp[i].data());
            dequantize_int8_rows(st.q[i].data(), st.scales[i].data(), rows, cols, out, dtype_);
            v.data = out;
          }
          st.views.push_back(v);
          continue;
        }
        if (dtype_ == DType::kF32) {
          v.data = st.master[i].data();
        } else {
          convert(st.master[i].data(), DType::kF32, st.lowp[i].data(), dtype_, v.numel);
          v.data = st.lowp[i].data();
        }
        st.views.push_back(v);
      }
    }
  }

  // forward() of every unit in order.
  void forward(bool training = true) {
    StepInfo info;
    info.training = training;
    for (size_t u = 0; u < units_.size(); ++u) model_.unit(u).forward(units_[u].views, info);
  }

  // Every gradient to zero.
  void zero_grads() {
    for (UnitState& st : units_)
      for (auto& g : st.grads) std::fill(g.begin(), g.end(), 0.0f);
  }

  // Backward over all units in reverse; zeroes the gradients first unless `zero` is false (the
  // caller did, e.g. outside a timed region).
  void backward(float loss_scale = 1.0f, bool zero = true) {
    if (zero) zero_grads();
    StepInfo info;
    info.loss_scale = loss_scale;
    for (size_t u = units_.size(); u-- > 0;) {
      UnitState& st = units_[u];
      GradViews& gv = st.grad_views;
      gv.clear_produced();
      model_.unit(u).backward(st.views, gv, info);
      for (size_t i = 0; i < gv.size(); ++i) produced_all_ &= !gv.wanted(i) || gv.produced(i);
    }
  }

  // master -= lr * grad / loss_scale for every parameter, then refresh().
  void sgd(float lr, float loss_scale = 1.0f) {
    for (UnitState& st : units_)
      for (size_t i = 0; i < st.master.size(); ++i)
        for (size_t j = 0; !st.specs[i].tied() && j < st.master[i].size(); ++j)
          st.master[i][j] -= lr * st.grads[i][j] / loss_scale;
    refresh();
  }

  // Accessors by unit and parameter index (the spec's order); produced_all(): every wanted
  // gradient was marked produced by every backward so far.
  const std::vector<float>& grad(size_t unit, size_t param) const {
    const auto [ou, oi] = units_[unit].owner[param];
    return units_[ou].grads[oi];
  }
  std::vector<float>& master(size_t unit, size_t param) {
    const auto [ou, oi] = units_[unit].owner[param];
    return units_[ou].master[oi];
  }
  size_t num_params(size_t unit) const { return units_[unit].specs.size(); }
  const ParamSpec& spec(size_t unit, size_t param) const { return units_[unit].specs[param]; }
  size_t num_units() const { return units_.size(); }
  bool produced_all() const { return produced_all_; }

 private:
  // Where parameter `param` of `unit` lives: itself, or its tied owner (unit, index).
  std::pair<size_t, size_t> owner_of(size_t unit, size_t param) const {
    const ParamSpec& s = units_[unit].specs[param];
    if (!s.tied()) return {unit, param};
    const size_t o = static_cast<size_t>(s.tied_to.unit);
    const std::vector<ParamSpec>& os = units_.at(o).specs;
    for (size_t j = 0; j < os.size(); ++j)
      if (os[j].name == s.tied_to.param) return {o, j};
    fail(ErrorCode::kInvalidArgument,
         "unit {} parameter '{}' is tied to '{}' of unit {}: no such "
         "parameter",
         unit, s.name, s.tied_to.param, o);
  }

  struct UnitState {
    std::vector<ParamSpec> specs;
    std::vector<std::pair<size_t, size_t>> owner;  // owner_of() per parameter
    std::vector<std::vector<float>> master, grads;
    std::vector<std::vector<uint16_t>> lowp;
    std::vector<std::vector<int8_t>> q;  // int8 records (set_int8)
    std::vector<std::vector<float>> scales, deq32;
    std::vector<ParamView> views;
    GradViews grad_views;
  };
  Model& model_;
  DType dtype_;
  std::vector<UnitState> units_;
  bool produced_all_ = true;
  bool int8_ = false, raw_ = false;
};

}  // namespace zs
