// Muon ([Note: Muon parameters] in runtime/engine_config.h): the fixed-order Newton-Schulz against
// a float64 reference and at any thread count; the engine's Muon + AdamW against a float64
// reference of the algorithm on a model with prescribed gradients (updates within 1e-5
// relative); stages 0-3 the same bits; the same bits at 1, 2, 4 ranks in the world-invariant
// mode; bitwise resume; the planned bytes against the tracker and the formula; bad settings
// refused by name.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "mlp_model.h"
#include "optim/newton_schulz.h"
#include "plan_check.h"
#include "resume_check.h"
#include "runtime/engine.h"
#include "runtime/muon_update.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::error_of;
using testing::MlpModel;
using testing::MlpShape;
using testing::world;

// ---------------------------------------------------------------------------------------------
// float64 references of the algorithm (optim/muon.h, optim/newton_schulz.h)

std::vector<double> ns_reference(const std::vector<double>& g, int64_t rows, int64_t cols,
                                 int steps) {
  const bool tall = rows > cols;
  const int64_t r = tall ? cols : rows, c = tall ? rows : cols;
  std::vector<double> x(static_cast<size_t>(r * c));
  double sq = 0.0;
  for (double v : g) sq += v * v;
  const double inv = 1.0 / (std::sqrt(sq) + 1e-7);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      x[static_cast<size_t>(tall ? j * c + i : i * c + j)] =
          g[static_cast<size_t>(i * cols + j)] * inv;
  const double a = optim::kNewtonSchulzA, b = optim::kNewtonSchulzB, cc = optim::kNewtonSchulzC;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> A(static_cast<size_t>(r * r)), B(A.size()), y(x.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) {
        double t = 0.0;
        for (int64_t k = 0; k < c; ++k) t += x[i * c + k] * x[j * c + k];
        A[i * r + j] = t;
      }
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) {
        double t = 0.0;
        for (int64_t k = 0; k < r; ++k) t += A[i * r + k] * A[k * r + j];
        B[i * r + j] = b * A[i * r + j] + cc * t;
      }
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        double t = 0.0;
        for (int64_t k = 0; k < r; ++k) t += B[i * r + k] * x[k * c + j];
        y[i * c + j] = a * x[i * c + j] + t;
      }
    x = y;
  }
  std::vector<double> out(g.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[static_cast<size_t>(i * cols + j)] = x[static_cast<size_t>(tall ? j * c + i : i * c + j)];
  return out;
}

template <typename A, typename B>
double relative_difference(const A& got, const B& want) {
  double d = 0.0, n = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    n += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(n), 1e-300);
}

std::vector<float> random_matrix(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(gen);
  return v;
}

TEST(NewtonSchulz, MatchesFloat64Reference) {
  const int64_t shapes[][2] = {{8, 8}, {16, 40}, {40, 16}, {33, 7}, {1, 5}, {64, 96}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const std::vector<float> g =
        random_matrix(rows * cols, static_cast<uint32_t>(rows * 131 + cols));
    std::vector<float> out(g.size()),
        ws(static_cast<size_t>(optim::newton_schulz_workspace(rows, cols)));
    optim::newton_schulz(g.data(), rows, cols, 5, out.data(), ws.data());
    const std::vector<double> ref = ns_reference({g.begin(), g.end()}, rows, cols, 5);
    const double rel = relative_difference(out, ref);
    std::printf("newton_schulz %ldx%ld: relative difference to float64 %.3g\n",
                static_cast<long>(rows), static_cast<long>(cols), rel);
    EXPECT_LT(rel, 1e-5) << rows << "x" << cols;
  }
}

TEST(NewtonSchulz, FixedOrderProductAndSameBitsAtAnyThreadCount) {
  const int64_t m = 37, k = 300, n = 530;  // past the fork threshold, ragged blocks
  const std::vector<float> a = random_matrix(m * k, 1), b = random_matrix(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n)), naive(c.size());
  optim::matmul_fixed_order(a.data(), b.data(), c.data(), m, k, n, 3);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float t = 0.0f;
      for (int64_t p = 0; p < k; ++p) t = t + a[i * k + p] * b[p * n + j];
      naive[i * n + j] = t;
    }
  EXPECT_EQ(std::memcmp(c.data(), naive.data(), c.size() * sizeof(float)), 0)
      << "the product is not the k-ordered chain";
  const int64_t rows = 96, cols = 200;
  const std::vector<float> g = random_matrix(rows * cols, 3);
  std::vector<float> ws(static_cast<size_t>(optim::newton_schulz_workspace(rows, cols)));
  std::vector<float> one(g.size()), other(g.size());
  optim::newton_schulz(g.data(), rows, cols, 5, one.data(), ws.data(), 1);
  for (int t : {2, 3, 4}) {
    optim::newton_schulz(g.data(), rows, cols, 5, other.data(), ws.data(), t);
    EXPECT_EQ(std::memcmp(one.data(), other.data(), one.size() * sizeof(float)), 0)
        << t << " threads";
  }
  std::vector<float> zero(g.size(), 0.0f), zout(g.size(), 1.0f);
  optim::newton_schulz(zero.data(), rows, cols, 5, zout.data(), ws.data());
  for (float v : zout) ASSERT_EQ(v, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// The engine against the float64 reference: units whose gradients are prescribed, a function of
// (step, unit, parameter, element) and of the parameter's own value, the same on every rank and
// micro-batch (so that their average is exact at 1, 2 and 4 ranks).

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  bool decay;
};

struct Prescribed;

class PrescribedUnit : public Unit {
 public:
  PrescribedUnit(Prescribed& m, int index, std::string name, std::vector<Param> params)
      : m_(m), index_(index), name_(std::move(name)), params_(std::move(params)) {}
  std::string name() const override { return name_; }
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> s;
    for (const Param& p : params_) {
      ParamSpec spec;
      spec.name = p.name;
      spec.shape = p.shape;
      spec.init = Init::normal(0.0f, 0.5f);
      spec.weight_decay = p.decay;
      s.push_back(spec);
    }
    return s;
  }
  void forward(std::span<const ParamView>, const StepInfo&) override {}
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override;

 private:
  Prescribed& m_;
  int index_;
  std::string name_;
  std::vector<Param> params_;
};

// The gradient of element i of parameter q of unit u at step t, from its value w.
double prescribed_grad(int64_t t, int u, int q, int64_t i, double w) {
  return 0.3 * std::sin(0.7 * static_cast<double>(t) + 3.0 * u + 5.0 * q + 0.37 * i) + 0.05 * w;
}

struct Prescribed : Model {
  Prescribed() {
    units_.push_back(std::make_unique<PrescribedUnit>(*this, 0, "embed",
                                                      std::vector<Param>{{"wte", {10, 6}, true}}));
    units_.push_back(
        std::make_unique<PrescribedUnit>(*this, 1, "block.0",
                                         std::vector<Param>{{"ln.weight", {6}, false},
                                                            {"fc.weight", {14, 6}, true},
                                                            {"fc.bias", {14}, false},
                                                            {"proj.weight", {6, 14}, true}}));
    units_.push_back(std::make_unique<PrescribedUnit>(
        *this, 2, "block.1", std::vector<Param>{{"qkv.weight", {18, 6}, true}}));
    units_.push_back(std::make_unique<PrescribedUnit>(
        *this, 3, "head", std::vector<Param>{{"lm_head.weight", {10, 6}, true}}));
  }
  size_t num_units() const override { return units_.size(); }
  Unit& unit(size_t i) override { return *units_[i]; }
  void load_micro_batch(int) override {}
  double loss() const override { return 1.0; }
  int64_t step = 0;

 private:
  std::vector<std::unique_ptr<Unit>> units_;
};

void PrescribedUnit::backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) {
  for (size_t q = 0; q < params_.size(); ++q) {
    float* d = g.grad(q);
    for (int64_t i = 0; i < p[q].numel; ++i) {
      d[i] += info.loss_scale * static_cast<float>(prescribed_grad(
                                    m_.step, index_, static_cast<int>(q), i, p[q].at(i)));
    }
  }
}

// One parameter's float64 state.
struct RefParam {
  std::vector<double> w, m, v;
  int64_t rows = 0, cols = 0;
  bool muon = false, decay = true;
};

void reference_step(std::vector<std::vector<RefParam>>& units, int64_t t,
                    const OptimizerConfig& o) {
  const double lr = o.schedule.lr, wd = o.adamw.weight_decay;
  const double b1 = o.adamw.beta1, b2 = o.adamw.beta2, eps = o.adamw.eps, mu = o.muon.momentum;
  for (size_t u = 0; u < units.size(); ++u) {
    for (size_t q = 0; q < units[u].size(); ++q) {
      RefParam& p = units[u][q];
      const size_t n = p.w.size();
      std::vector<double> g(n);
      for (size_t i = 0; i < n; ++i)
        g[i] = prescribed_grad(t - 1, static_cast<int>(u), static_cast<int>(q),
                               static_cast<int64_t>(i), p.w[i]);
      const double decay = p.decay ? 1.0 - lr * wd : 1.0;
      if (p.muon) {
        std::vector<double> nes(n);
        for (size_t i = 0; i < n; ++i) {
          p.m[i] = mu * p.m[i] + g[i];
          nes[i] = g[i] + mu * p.m[i];
        }
        const std::vector<double> ortho = ns_reference(nes, p.rows, p.cols, o.muon.ns_steps);
        const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(p.rows, p.cols)));
        for (size_t i = 0; i < n; ++i) p.w[i] = p.w[i] * decay - lr * scale * ortho[i];
        continue;
      }
      const double c1 = 1.0 - std::pow(b1, static_cast<double>(t));
      const double c2 = std::sqrt(1.0 - std::pow(b2, static_cast<double>(t)));
      for (size_t i = 0; i < n; ++i) {
        p.m[i] = b1 * p.m[i] + (1.0 - b1) * g[i];
        p.v[i] = b2 * p.v[i] + (1.0 - b2) * g[i] * g[i];
        p.w[i] = p.w[i] * decay - lr / c1 * (p.m[i] / (std::sqrt(p.v[i]) / c2 + eps));
      }
    }
  }
}

EngineConfig muon_config(ZeroStage stage, DType compute) {
  EngineConfig c;
  c.stage = stage;
  c.precision.param_dtype = compute;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.kind = OptimizerKind::kMuon;
  c.optimizer.schedule.lr = 2e-2f;
  c.optimizer.schedule.warmup_steps = 0;
  c.optimizer.schedule.total_steps = 0;  // constant
  c.clip_norm = 0.0f;
  return c;
}

TEST(Muon, MatchesFloat64ReferenceOnPrescribedGradients) {
  constexpr int kSteps = 3;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const EngineConfig c = muon_config(zero_stage_from_int(stage), DType::kF32);
    Prescribed model;
    Engine engine(model, world(), c);
    std::vector<std::vector<RefParam>> ref(engine.num_units());
    std::vector<std::vector<std::vector<float>>> initial(engine.num_units());
    int muon_params = 0;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      for (size_t q = 0; q < engine.param_specs(u).size(); ++q) {
        const ParamSpec& s = engine.param_specs(u)[q];
        RefParam p;
        initial[u].push_back(engine.gather_master_param(u, q));
        p.w.assign(initial[u][q].begin(), initial[u][q].end());
        p.m.assign(p.w.size(), 0.0);
        p.v.assign(p.w.size(), 0.0);
        p.muon = muon_param(c.optimizer, engine.unit_name(u), s.shape);
        p.decay = s.weight_decay;
        if (p.muon) {
          p.rows = s.shape[0];
          p.cols = s.shape[1];
          ++muon_params;
        }
        ref[u].push_back(std::move(p));
      }
    }
    EXPECT_EQ(muon_params, 3);  // fc, proj, qkv: not the embedding, the head, norms or biases
    for (int t = 1; t <= kSteps; ++t) {
      model.step = t - 1;
      engine.step();
      reference_step(ref, t, c.optimizer);
    }
    for (size_t u = 0; u < engine.num_units(); ++u) {
      for (size_t q = 0; q < engine.param_specs(u).size(); ++q) {
        const std::vector<float> got = engine.gather_master_param(u, q);
        std::vector<double> du(got.size()), dr(got.size());
        for (size_t i = 0; i < got.size(); ++i) {
          du[i] = static_cast<double>(got[i]) - initial[u][q][i];
          dr[i] = ref[u][q].w[i] - initial[u][q][i];
        }
        const double rel = relative_difference(du, dr);
        if (world().rank() == 0)
          std::printf("stage %d %s.%s (%s): update relative difference %.3g\n", stage,
                      engine.unit_name(u).c_str(), engine.param_specs(u)[q].name.c_str(),
                      ref[u][q].muon ? "muon" : "adamw", rel);
        EXPECT_LT(rel, 1e-5) << engine.unit_name(u) << "." << engine.param_specs(u)[q].name;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The engine on the test MLP with its hidden units named block.* (their weights Muon's).

MlpShape block_shape() {
  MlpShape s;
  s.hidden_name = "block";
  return s;
}

uint64_t train_hash(const EngineConfig& c, int steps, MemoryTracker* tracker = nullptr) {
  MlpModel model(block_shape(), world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c, tracker);
  for (int t = 0; t < steps; ++t) {
    model.set_step(t);
    engine.step();
  }
  return engine.param_hash();
}

// [Note: Muon sharding] The owners: the largest matrices first, each to the least loaded rank by
// Newton-Schulz FLOPs (r = min side, c = max side: 4 r^2 c + 2 r^3 per iteration), ties to the
// lowest rank and in layout order; a parameter that is not a matrix has none.
TEST(Muon, OwnersBalanceNewtonSchulzFlops) {
  const std::vector<MuonMatrix> m = {{64, 512}, {256, 64}, {64, 256}, {}, {64, 64}};
  EXPECT_EQ(newton_schulz_flops(m[0], 5), 5.0 * (4.0 * 64 * 64 * 512 + 2.0 * 64 * 64 * 64));
  EXPECT_EQ(newton_schulz_flops(m[1], 1), newton_schulz_flops(m[2], 1));  // transposed alike
  EXPECT_EQ(muon_owners(m, 1, 5), (std::vector<int>{0, 0, 0, -1, 0}));
  // 2 ranks: 512-wide to 0, the two 256-wide to 1 (4.7M, then 9.4M), the square to 0 (8.9M).
  EXPECT_EQ(muon_owners(m, 2, 5), (std::vector<int>{0, 1, 1, -1, 0}));
  EXPECT_EQ(muon_owners(m, 3, 5), (std::vector<int>{0, 1, 2, -1, 1}));
  EXPECT_EQ(muon_owners(m, 8, 5), (std::vector<int>{0, 1, 2, -1, 3}));
}

TEST(Muon, StagesGiveTheSameBits) {
  for (DType compute : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(compute));
    EngineConfig c = muon_config(ZeroStage::k0, compute);
    c.clip_norm = 1.0f;  // one micro-batch: stages 0-1 and 2-3 add micro-batches apart
    const uint64_t h0 = train_hash(c, 8);
    for (int stage = 1; stage <= 3; ++stage) {
      c.stage = zero_stage_from_int(stage);
      EXPECT_EQ(train_hash(c, 8), h0) << "stage " << stage << " vs stage 0";
    }
    EngineConfig adam = c;
    adam.optimizer.kind = OptimizerKind::kAdamW;
    EXPECT_NE(train_hash(adam, 8), h0) << "Muon ran as AdamW";
  }
}

TEST(Muon, SameBitsAtEveryWorldSizeInTheWorldInvariantMode) {
  constexpr int kGlobalMicroBatches = 8;
  for (int stage : {0, 1, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    EngineConfig c = muon_config(zero_stage_from_int(stage), DType::kBF16);
    c.world_invariant = true;
    c.clip_norm = 0.5f;
    uint64_t first = 0;
    for (int n = 1; n <= world().size(); n *= 2) {
      std::unique_ptr<Communicator> comm = world().split(world().rank() / n, world().rank());
      c.micro_batches = kGlobalMicroBatches / n;
      MlpShape s = block_shape();
      s.global_batch = 16;
      MlpModel model(s, n, comm->rank(), c.micro_batches);
      Engine engine(model, *comm, c);
      for (int t = 0; t < 6; ++t) {
        model.set_step(t);
        engine.step();
      }
      const uint64_t h = engine.param_hash();
      if (n == 1) first = h;
      EXPECT_EQ(h, first) << n << " ranks vs 1";
    }
  }
}

TEST(Muon, ResumesBitwise) {
  for (int stage : {0, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    EngineConfig c = muon_config(zero_stage_from_int(stage), DType::kBF16);
    testing::expect_resume_bitwise(c, "muon_resume", 5, 1, block_shape());
  }
}

TEST(Muon, CheckpointRecordsTheRulesAndRefusesAnotherOptimizer) {
  const std::string dir = testing::shared_temp_dir("muon_rules");
  const EngineConfig c = muon_config(ZeroStage::k3, DType::kBF16);
  std::string path;
  {
    MlpModel model(block_shape(), world().size(), world().rank(), 1);
    Engine engine(model, world(), c);
    engine.step();
    path = save_checkpoint(engine, world(), dir);
  }
  EngineConfig adam = c;
  adam.optimizer.kind = OptimizerKind::kAdamW;
  MlpModel model(block_shape(), world().size(), world().rank(), 1);
  Engine engine(model, world(), adam);
  const std::string msg = error_of([&] { load_checkpoint(engine, world(), path); });
  EXPECT_NE(msg.find("optimizer muon in the checkpoint, adamw in the engine"), std::string::npos)
      << msg;
}

TEST(Muon, PlannedBytesMatchTheTrackerAndTheFormula) {
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const EngineConfig c = muon_config(zero_stage_from_int(stage), DType::kBF16);
    MemoryTracker tracker;
    MlpModel model(block_shape(), world().size(), world().rank(), 1);
    Engine engine(model, world(), c, &tracker);
    testing::expect_plan_equals_tracker(
        model, c, world().size(), world().rank(), tracker,
        {MemCategory::kMaster, MemCategory::kOptimizer, MemCategory::kCommBuffers});
    // exp_avg: 4 bytes per state element; exp_avg_sq: 4 per AdamW element only (the largest
    // rank's), so Muon's matrices cost 4 bytes per parameter instead of AdamW's 8.
    int64_t optimizer = 0, adamw_whole = 0;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      const UnitShardState st = engine.shard_state(u);
      optimizer += 4 * st.numel;
      for (size_t q = 0; q < engine.param_specs(u).size(); ++q) {
        if (!muon_param(c.optimizer, engine.unit_name(u), engine.param_specs(u)[q].shape))
          adamw_whole += engine.layout(u).params[q].numel;
      }
    }
    const int64_t sq = tracker.current(MemCategory::kOptimizer) - optimizer;
    if (stage == 0 || world().size() == 1) {
      EXPECT_EQ(sq, 4 * adamw_whole);
    } else {
      EXPECT_LE(sq, 4 * adamw_whole);  // a shard of it, padded to the largest rank's
    }
  }
}

TEST(Muon, BadSettingsRefusedByName) {
  auto refused = [](const EngineConfig& c) {
    MlpModel model(block_shape(), world().size(), world().rank(), 1);
    return error_of([&] { Engine engine(model, world(), c); });
  };
  EngineConfig c = muon_config(ZeroStage::k3, DType::kBF16);
  for (float m : {1.0f, -0.1f, std::nanf("")}) {
    c.optimizer.muon.momentum = m;
    EXPECT_NE(refused(c).find("optimizer.muon.momentum"), std::string::npos) << m;
  }
  c = muon_config(ZeroStage::k3, DType::kBF16);
  c.optimizer.muon.ns_steps = 0;
  EXPECT_NE(refused(c).find("optimizer.muon.ns_steps 0 is outside 1..100"), std::string::npos);
  c = muon_config(ZeroStage::k3, DType::kBF16);
  c.offload.optimizer = true;
  EXPECT_NE(refused(c).find("optimizer offload with optimizer muon is not implemented"),
            std::string::npos);
  c = muon_config(ZeroStage::k3, DType::kBF16);
  c.optimizer.state_dtype = optim::StateDType::kI8;
  EXPECT_NE(refused(c).find("state_dtype int8 with optimizer muon is not implemented"),
            std::string::npos);
}

}  // namespace
}  // namespace zs
