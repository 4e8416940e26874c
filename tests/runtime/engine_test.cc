// Multi-rank tests of the engine (run at 1, 2 and 4 ranks): stage parity (bitwise), agreement
// with an unsharded single-process reference, memory bytes against the ZeRO formulas,
// communication volume, loss scaling, clipping, accumulation, prefetch and bad input.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "mlp_model.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;

using testing::world;
Communicator& self() {
  static auto s = std::make_unique<MpiCommunicator>(MPI_COMM_SELF);
  return *s;
}

EngineConfig make_config(int stage, DType dtype) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = dtype;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 10;
  c.optimizer.adamw.weight_decay = 0.1f;
  c.clip_norm = 1.0f;
  c.prefetch = 1;
  return c;
}

struct TrainRun {
  std::vector<std::vector<float>> groups;  // full fp32 master per unit
  uint64_t hash = 0;
  std::vector<StepStats> stats;
};

TrainRun train(Communicator& comm, const EngineConfig& cfg, int steps, MlpShape shape = {},
               MemoryTracker* tracker = nullptr) {
  MlpModel model(shape, comm.size(), comm.rank(), cfg.micro_batches);
  MemoryTracker local;
  Engine engine(model, comm, cfg, tracker ? tracker : &local);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    model.set_step(s);
    r.stats.push_back(engine.step());
  }
  for (size_t u = 0; u < engine.num_units(); ++u) r.groups.push_back(engine.gather_master_group(u));
  r.hash = engine.param_hash();
  return r;
}

bool bitwise_equal(const TrainRun& a, const TrainRun& b) {
  if (a.groups.size() != b.groups.size()) return false;
  for (size_t u = 0; u < a.groups.size(); ++u) {
    if (a.groups[u].size() != b.groups[u].size()) return false;
    if (std::memcmp(a.groups[u].data(), b.groups[u].data(), a.groups[u].size() * 4) != 0)
      return false;
  }
  return true;
}

// Max relative difference between the unpadded parameters of two runs with different layouts.
double max_rel_diff(const TrainRun& a, const Engine* la, const TrainRun& b,
                    const std::vector<GroupLayout>& lb, const std::vector<GroupLayout>& lla) {
  (void)la;
  double worst = 0.0;
  for (size_t u = 0; u < a.groups.size(); ++u) {
    for (size_t p = 0; p < lla[u].params.size(); ++p) {
      for (int64_t i = 0; i < lla[u].params[p].numel; ++i) {
        const double x = a.groups[u][lla[u].params[p].offset + i];
        const double y = b.groups[u][lb[u].params[p].offset + i];
        worst = std::max(worst, std::abs(x - y) / std::max(1e-3, std::abs(y)));
      }
    }
  }
  return worst;
}

std::vector<GroupLayout> layouts_of(Communicator& comm, const EngineConfig& cfg) {
  MlpModel model(MlpShape{}, comm.size(), comm.rank(), cfg.micro_batches);
  MemoryTracker t;
  Engine e(model, comm, cfg, &t);
  std::vector<GroupLayout> out;
  for (size_t u = 0; u < e.num_units(); ++u) out.push_back(e.layout(u));
  return out;
}

class StageParity : public ::testing::TestWithParam<DType> {};

TEST_P(StageParity, StagesBitwiseIdenticalAndMatchUnshardedReference) {
  const DType dt = GetParam();
  const TrainRun s0 = train(world(), make_config(0, dt), 10);
  for (int stage = 1; stage <= 3; ++stage) {
    const TrainRun s = train(world(), make_config(stage, dt), 10);
    EXPECT_TRUE(bitwise_equal(s0, s)) << "stage " << stage << " differs from stage 0";
    EXPECT_EQ(s0.hash, s.hash) << "stage " << stage;
    for (size_t i = 0; i < s.stats.size(); ++i) {
      EXPECT_EQ(s0.stats[i].loss, s.stats[i].loss) << "stage " << stage << " step " << i;
      EXPECT_EQ(s0.stats[i].grad_norm, s.stats[i].grad_norm) << "stage " << stage;
    }
  }
  // The unsharded reference: one process, the whole global batch.
  const TrainRun ref = train(self(), make_config(0, dt), 10);
  const double diff = max_rel_diff(s0, nullptr, ref, layouts_of(self(), make_config(0, dt)),
                                   layouts_of(world(), make_config(0, dt)));
  if (world().rank() == 0) {
    std::printf("[%s] world %d vs unsharded reference: max relative difference %.3g\n",
                std::string(dtype_name(dt)).c_str(), world().size(), diff);
  }
  // fp32: the only difference is the order of the cross-rank sum (fp32 rounding, amplified a
  // little by 10 Adam steps). bf16: the parameters are rounded to bf16 (2^-8) before use.
  EXPECT_LT(diff, dt == DType::kF32 ? 1e-4 : 5e-2);
  if (world().size() == 1) {
    EXPECT_TRUE(bitwise_equal(s0, ref));
  }
  EXPECT_LT(s0.stats.back().loss, s0.stats.front().loss);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StageParity, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Engine, PrefetchDepthDoesNotChangeResults) {
  EngineConfig c = make_config(3, DType::kBF16);
  c.prefetch = 0;
  const TrainRun a = train(world(), c, 4);
  c.prefetch = 3;
  const TrainRun b = train(world(), c, 4);
  EXPECT_TRUE(bitwise_equal(a, b));
}

TEST(Engine, GradientDtypeBf16StagesBitwiseIdentical) {
  EngineConfig c = make_config(0, DType::kBF16);
  c.precision.grad_dtype = DType::kBF16;
  const TrainRun s0 = train(world(), c, 5);
  for (int stage = 1; stage <= 3; ++stage) {
    c.stage = zero_stage_from_int(stage);
    EXPECT_TRUE(bitwise_equal(s0, train(world(), c, 5))) << "stage " << stage;
  }
}

// Model-state bytes per rank = P*Psi_p + G*Psi_g + K*Psi_o + padding (DESIGN.md's general form),
// where Psi/N is this rank's share of parameter elements.
TEST(Engine, ModelStateBytesMatchZeroFormula) {
  const int N = world().size();
  struct Case {
    DType p, g;
  };
  for (Case cs : {Case{DType::kF32, DType::kF32}, Case{DType::kBF16, DType::kF32},
                  Case{DType::kBF16, DType::kBF16}, Case{DType::kF16, DType::kF16}}) {
    for (int stage = 0; stage <= 3; ++stage) {
      EngineConfig c = make_config(stage, cs.p);
      c.precision.grad_dtype = cs.g;
      MemoryTracker t;
      MlpModel model(MlpShape{}, N, world().rank(), 1);
      Engine e(model, world(), c, &t);
      int64_t psi = 0, mine = 0;
      for (size_t u = 0; u < e.num_units(); ++u) {
        psi += e.layout(u).numel;
        for (const ShardSegment& s : e.layout(u).shard_segments(world().rank())) mine += s.length;
      }
      double shares = static_cast<double>(mine);
      world().all_reduce(&shares, &shares, 1, DType::kF64, ReduceOp::kSum);
      EXPECT_EQ(static_cast<int64_t>(shares), psi) << "the ranks' shares must cover Psi exactly";
      const int64_t P = dtype_size(cs.p), G = dtype_size(cs.g);
      const int64_t K = cs.p == DType::kF32 ? 8 : 12;
      const int64_t psi_p = stage == 3 ? mine : psi;
      const int64_t psi_g = stage >= 2 ? mine : psi;
      const int64_t psi_o = stage >= 1 ? mine : psi;
      const int64_t model_states =
          t.current(MemCategory::kParams) + t.current(MemCategory::kGrads) +
          t.current(MemCategory::kMaster) + t.current(MemCategory::kOptimizer);
      EXPECT_EQ(model_states - e.padding_bytes(), P * psi_p + G * psi_g + K * psi_o)
          << "stage " << stage << " " << dtype_name(cs.p) << "/" << dtype_name(cs.g);
      for (MemCategory cat : {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster,
                              MemCategory::kOptimizer, MemCategory::kCommBuffers}) {
        EXPECT_EQ(t.current(cat), e.planned_bytes(cat)) << mem_category_name(cat);
      }
    }
  }
}

// Bytes sent per step: stages 0-2 move 2*Psi*(N-1)/N elements, stage 3 3*Psi*(N-1)/N.
TEST(Engine, CommunicationVolumeMatchesFormula) {
  const int N = world().size();
  for (int stage = 0; stage <= 3; ++stage) {
    EngineConfig c = make_config(stage, DType::kBF16);
    MlpModel model(MlpShape{}, N, world().rank(), 1);
    MemoryTracker t;
    Engine e(model, world(), c, &t);
    model.set_step(0);
    world().reset_counters();
    e.step();
    const ByteCounters& k = world().counters();
    const int64_t psi = e.num_padded_params();
    const int64_t ag = k.sent[static_cast<int>(CollectiveKind::kAllGather)];
    const int64_t rs = k.sent[static_cast<int>(CollectiveKind::kReduceScatter)];
    const int64_t G = 4, P = 2;
    const int64_t per = psi * (N - 1) / N;  // elements one collective pass moves per rank
    EXPECT_EQ(rs, G * per) << "stage " << stage;
    if (stage == 0) {
      EXPECT_EQ(ag, G * per);
    }
    if (stage == 1 || stage == 2) {
      EXPECT_EQ(ag, P * per);
    }
    if (stage == 3) {
      EXPECT_EQ(ag, 2 * P * per);
    }
    if (world().rank() == 0) {
      std::printf("stage %d, N=%d: Psi(padded)=%lld, reduce-scatter %lld B, all-gather %lld B\n",
                  stage, N, static_cast<long long>(psi), static_cast<long long>(rs),
                  static_cast<long long>(ag));
    }
  }
}

TEST(Engine, LossScalerSkipsOverflowOnEveryRankAndHalves) {
  for (int stage : {1, 3}) {
    EngineConfig c = make_config(stage, DType::kF16);
    c.loss_scale.dynamic = true;
    c.loss_scale.initial = 1024.0f;
    c.loss_scale.growth_interval = 2;
    c.loss_scale_set = true;
    MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
    MemoryTracker t;
    Engine e(model, world(), c, &t);
    model.set_step(0);
    StepStats s = e.step();
    EXPECT_FALSE(s.skipped);
    EXPECT_EQ(s.loss_scale, 1024.0f);
    const uint64_t before = e.param_hash();
    // Overflow on the last rank only.
    model.poison_next_backward(world().rank() == world().size() - 1);
    s = e.step();
    model.poison_next_backward(false);
    EXPECT_TRUE(s.skipped);
    EXPECT_EQ(s.nonfinite_unit, "head");
    EXPECT_EQ(e.loss_scaler_state().scale, 512.0f);
    EXPECT_EQ(e.param_hash(), before) << "a skipped step must leave parameters unchanged";
    EXPECT_EQ(e.steps_taken(), 1);
    s = e.step();
    EXPECT_FALSE(s.skipped);
    s = e.step();
    EXPECT_EQ(e.loss_scaler_state().scale, 1024.0f) << "doubles after 2 clean steps";
  }
}

// [Note: non-finite policy]: the unit where the NaN started is named (backward order), and a
// run without dynamic loss scaling stops at its first non-finite gradient, on every rank, with
// the parameters of the last applied step.
TEST(Engine, NonFiniteGradientStopsARunWithoutLossScaling) {
  for (int stage : {0, 3}) {
    EngineConfig c = make_config(stage, DType::kBF16);
    MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
    MemoryTracker t;
    Engine e(model, world(), c, &t);
    model.set_step(0);
    e.step();
    const uint64_t before = e.param_hash();
    model.poison_backward_from(2);  // hidden.2, and through its input gradient hidden.1 and .0
    try {
      e.step();
      ADD_FAILURE() << "stage " << stage << ": a non-finite gradient did not stop the run";
    } catch (const Error& x) {
      EXPECT_EQ(x.code(), ErrorCode::kNonFinite);
      EXPECT_NE(std::string(x.what()).find("step 2: the gradient of unit 'hidden.2' is not finite"),
                std::string::npos)
          << x.what();
      EXPECT_NE(std::string(x.what()).find("no dynamic loss scaling"), std::string::npos);
      EXPECT_NE(std::string(x.what()).find("parameters of step 1"), std::string::npos);
    }
    EXPECT_EQ(e.param_hash(), before) << "the stopped step must not update";
    EXPECT_EQ(e.steps_taken(), 1);
  }
}

TEST(Engine, DynamicLossScalingStopsAfterTooManyConsecutiveSkips) {
  EngineConfig c = make_config(1, DType::kF16);
  c.loss_scale.dynamic = true;
  c.loss_scale.initial = 1024.0f;
  c.loss_scale_set = true;
  c.max_consecutive_skips = 2;
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine e(model, world(), c, &t);
  model.set_step(0);
  model.poison_backward_from(4);  // the head
  StepStats s = e.step();
  EXPECT_TRUE(s.skipped);
  EXPECT_EQ(s.consecutive_skips, 1);
  EXPECT_EQ(s.nonfinite_unit, "head");
  s = e.step();
  EXPECT_EQ(s.consecutive_skips, 2);
  try {
    e.step();
    ADD_FAILURE() << "a third consecutive skip did not stop the run";
  } catch (const Error& x) {
    EXPECT_EQ(x.code(), ErrorCode::kNonFinite);
    EXPECT_NE(std::string(x.what()).find("3 consecutive step(s) skipped, more than "
                                         "max_consecutive_skips = 2, loss scale 256"),
              std::string::npos)
        << x.what();
  }
  // A clean step in between resets the count.
  Engine e2(model, world(), c, &t);
  for (int i = 0; i < 3; ++i) {
    model.poison_backward_from(i == 1 ? -1 : 4);
    EXPECT_NO_THROW(e2.step());
  }
  model.poison_backward_from(-1);
}

TEST(Engine, NonFiniteLossStopsAtOnce) {
  EngineConfig c = make_config(2, DType::kF32);
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine e(model, world(), c, &t);
  model.set_step(0);
  model.poison_loss(world().rank() == 0);  // one rank is enough: the loss is all-reduced
  try {
    e.step();
    ADD_FAILURE() << "a NaN loss did not stop the run";
  } catch (const Error& x) {
    EXPECT_EQ(x.code(), ErrorCode::kNonFinite);
    EXPECT_NE(std::string(x.what()).find("step 1: the loss is not finite"), std::string::npos)
        << x.what();
  }
  model.poison_loss(false);
  EngineConfig bad = c;
  bad.max_consecutive_skips = -2;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(Engine, GradNormMatchesUnshardedAndClips) {
  EngineConfig c = make_config(2, DType::kF32);
  c.clip_norm = 0.05f;
  const TrainRun sharded = train(world(), c, 3);
  const TrainRun ref = train(self(), c, 3);
  for (size_t i = 0; i < ref.stats.size(); ++i) {
    EXPECT_NEAR(sharded.stats[i].grad_norm, ref.stats[i].grad_norm, 1e-5 * ref.stats[i].grad_norm);
    EXPECT_GT(ref.stats[i].grad_norm, 0.05) << "clipping must be active in this test";
  }
  const double diff =
      max_rel_diff(sharded, nullptr, ref, layouts_of(self(), c), layouts_of(world(), c));
  EXPECT_LT(diff, 1e-4);
}

TEST(Engine, AccumulationEqualsOneLargeBatch) {
  for (int stage : {0, 1, 2, 3}) {
    EngineConfig c = make_config(stage, DType::kF32);
    MlpShape shape;
    shape.global_batch = 8;
    const TrainRun one = train(world(), c, 3, shape);
    c.micro_batches = 2;
    const TrainRun two = train(world(), c, 3, shape);
    double worst = 0.0;
    for (size_t u = 0; u < one.groups.size(); ++u)
      for (size_t i = 0; i < one.groups[u].size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(one.groups[u][i] - two.groups[u][i])));
    // Adam divides by sqrt(v): a rounding-level difference in a small gradient moves the
    // parameter by up to ~lr * 1e-3 after a few steps.
    if (world().rank() == 0)
      std::printf("stage %d: 2 x b vs 1 x 2b max |diff| %.3g\n", stage, worst);
    EXPECT_LT(worst, 1e-4) << "stage " << stage;
    for (size_t i = 0; i < one.stats.size(); ++i)
      EXPECT_NEAR(one.stats[i].loss, two.stats[i].loss, 1e-6);
  }
}

// param_hash streams a sharded master a piece at a time (no rank holds a whole unit): it equals
// xxHash64 of the gathered master's parameter elements in canonical order, at every stage, with
// and without offload, at every world size.
TEST(Engine, ParamHashIsTheHashOfTheGatheredMaster) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (int offload = 0; offload <= (stage > 0 ? 1 : 0); ++offload) {
      EngineConfig c = make_config(stage, DType::kBF16);
      c.offload.optimizer = offload != 0;
      MlpShape shape;
      shape.width = 37;  // odd sizes: shards end inside parameters, padding at the end
      MlpModel model(shape, world().size(), world().rank(), c.micro_batches);
      Engine engine(model, world(), c);
      for (int s = 0; s < 2; ++s) {
        model.set_step(s);
        engine.step();
      }
      XXH64_state_t* h = XXH64_createState();
      XXH64_reset(h, 0);
      for (size_t u = 0; u < engine.num_units(); ++u) {
        const std::vector<float> full = engine.gather_master_group(u);
        for (const ParamSlot& slot : engine.layout(u).params)
          XXH64_update(h, full.data() + slot.offset, static_cast<size_t>(slot.numel) * 4);
      }
      const uint64_t want = XXH64_digest(h);
      XXH64_freeState(h);
      EXPECT_EQ(engine.param_hash(), want) << "stage " << stage << " offload " << offload;
    }
  }
}

// The offloaded optimizer (host arena + SIMD CPU Adam) gives the parameters of the resident one.
TEST(Engine, OffloadedOptimizerBitwiseIdentical) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int stage = 1; stage <= 3; ++stage) {
      EngineConfig c = make_config(stage, dt);
      const TrainRun resident = train(world(), c, 6);
      c.offload.optimizer = true;
      MemoryTracker t;
      const TrainRun offloaded = train(world(), c, 6, MlpShape{}, &t);
      EXPECT_TRUE(bitwise_equal(resident, offloaded)) << "stage " << stage << " " << dtype_name(dt);
      EXPECT_EQ(resident.hash, offloaded.hash);
    }
  }
}

TEST(Engine, OffloadBytesCountedAsHost) {
  EngineConfig c = make_config(3, DType::kBF16);
  c.offload.optimizer = true;
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine e(model, world(), c, &t);
  EXPECT_EQ(t.current(MemCategory::kMaster), 0);
  EXPECT_EQ(t.current(MemCategory::kOptimizer), 0);
  int64_t shard = 0;
  for (size_t u = 0; u < e.num_units(); ++u) shard += e.layout(u).shard_numel;
  EXPECT_EQ(t.current(MemCategory::kHostOffload), 12 * shard);  // fp32 master, m, v
  EXPECT_EQ(t.current(MemCategory::kHostOffload), e.planned_bytes(MemCategory::kHostOffload));
}

TEST(Engine, SgdStagesBitwiseIdentical) {
  EngineConfig c = make_config(0, DType::kBF16);
  c.optimizer.kind = OptimizerKind::kSgd;
  const TrainRun s0 = train(world(), c, 4);
  c.stage = ZeroStage::k3;
  EXPECT_TRUE(bitwise_equal(s0, train(world(), c, 4)));
}

// ---- bad input ----

TEST(EngineErrors, BadStageAndDtype) {
  EXPECT_THROW(zero_stage_from_int(4), Error);
  try {
    zero_stage_from_int(-1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos);
  }
  EXPECT_THROW(parse_dtype("fp8"), Error);
  EngineConfig c = make_config(3, DType::kI8);
  EXPECT_THROW(c.validate(), Error);
  c = make_config(3, DType::kBF16);
  c.precision.grad_dtype = DType::kF16;
  EXPECT_THROW(c.validate(), Error);
}

class EmptyUnit : public Unit {
 public:
  std::string name() const override { return "empty"; }
  std::vector<ParamSpec> param_specs() const override { return {}; }
  void forward(std::span<const ParamView>, const StepInfo&) override {}
  void backward(std::span<const ParamView>, GradViews&, const StepInfo&) override {}
};
class EmptyModel : public Model {
 public:
  size_t num_units() const override { return 1; }
  Unit& unit(size_t) override { return u_; }
  void load_micro_batch(int) override {}
  double loss() const override { return 0; }
  EmptyUnit u_;
};

// Values outside their domain are refused at construction, the field named (not NaN later).
TEST(EngineErrors, ValuesOutsideTheirDomainNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* field;
    std::function<void(EngineConfig&)> set;
  };
  const std::vector<Case> cases = {
      {"optimizer.schedule.lr", [&](EngineConfig& c) { c.optimizer.schedule.lr = inf; }},
      {"optimizer.schedule.lr", [&](EngineConfig& c) { c.optimizer.schedule.lr = nan; }},
      {"optimizer.schedule.min_ratio", [](EngineConfig& c) { c.optimizer.schedule.min_ratio = 2; }},
      {"optimizer.adamw.beta1", [](EngineConfig& c) { c.optimizer.adamw.beta1 = 1.0f; }},
      {"optimizer.adamw.beta2", [&](EngineConfig& c) { c.optimizer.adamw.beta2 = nan; }},
      {"optimizer.adamw.eps", [](EngineConfig& c) { c.optimizer.adamw.eps = 0.0f; }},
      {"optimizer.adamw.weight_decay",
       [](EngineConfig& c) { c.optimizer.adamw.weight_decay = -1; }},
      {"optimizer.sgd.momentum", [](EngineConfig& c) { c.optimizer.sgd.momentum = -0.5f; }},
      {"clip_norm", [&](EngineConfig& c) { c.clip_norm = nan; }},
      {"loss scale initial", [](EngineConfig& c) { c.loss_scale.initial = 0.0f; }},
      {"loss_scale.backoff", [](EngineConfig& c) { c.loss_scale.backoff = 2.0f; }},
      {"loss_scale.growth", [&](EngineConfig& c) { c.loss_scale.growth = inf; }},
      {"loss_scale.growth_interval", [](EngineConfig& c) { c.loss_scale.growth_interval = 0; }},
      {"optimizer_threads", [](EngineConfig& c) { c.optimizer_threads = -3; }},
  };
  for (const Case& k : cases) {
    EngineConfig c = make_config(3, DType::kBF16);
    k.set(c);
    try {
      c.validate();
      ADD_FAILURE() << k.field << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(k.field), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(make_config(3, DType::kBF16).validate());
}

TEST(EngineErrors, ZeroSizeUnitRejected) {
  EmptyModel m;
  try {
    Engine e(m, world(), make_config(3, DType::kF32));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("('empty') declares no parameters"), std::string::npos)
        << e.what();
  }
}

TEST(EngineErrors, MissingGradientNamed) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine e(model, world(), make_config(3, DType::kF32), &t);
  model.drop_gradient(true);
  try {
    e.step();
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'hidden.0'"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("'bias'"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace zs
