// ZeRO++ hpZ in the engine ([Note: hpZ] in runtime/engine_config.h), run at 1, 2 and 4 ranks. At 4
// ranks (2 nodes of 2, node_size 2, K = 2): plain ZeRO-3's bits with and without qwZ, with
// micro-batches, fp16 skipped steps and evaluations between steps (a stale secondary shard would
// show); the world gathers fall to one per unit and step, the rest run within the K-rank group,
// as the formula and zs_plan's communication model say; the memory is the planner's. At every
// size: the switch refused by name where it cannot apply.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "mlp_model.h"
#include "plan_check.h"
#include "planner/comm_model.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::error_of;
using testing::MlpModel;
using testing::MlpShape;
using testing::world;

EngineConfig make_config(int K, int node_size) {
  EngineConfig c;
  c.stage = ZeroStage::k3;
  c.precision.param_dtype = DType::kBF16;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 8;
  c.node_size = node_size;
  c.zeropp.hpz_partition_size = K;
  return c;
}

struct HpzRun {
  std::vector<StepStats> stats;
  std::vector<double> eval;  // the evaluation loss after each step
  uint64_t hash = 0;
};

HpzRun train(const EngineConfig& c, int steps) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c);
  HpzRun r;
  for (int s = 0; s < steps; ++s) {
    model.set_step(s);
    r.stats.push_back(engine.step());
    model.load_micro_batch(0);
    engine.forward();  // gathers once per unit: the secondary shards must not be read stale
    r.eval.push_back(model.loss());
  }
  r.hash = engine.param_hash();
  return r;
}

TEST(Hpz, GivesPlainZero3sBits) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks (2 nodes of 2)";
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    EngineConfig h = make_config(2, 2), plain = make_config(1, 2);
    for (EngineConfig* c : {&h, &plain}) {
      c->micro_batches = variant == 1 ? 2 : 1;
      c->zeropp.quantized_weights = variant == 2;
      if (variant == 3) c->precision.param_dtype = DType::kF16;  // dynamic loss scaling
    }
    const HpzRun a = train(h, 8), p = train(plain, 8);
    EXPECT_EQ(a.hash, p.hash);
    EXPECT_EQ(a.eval, p.eval);
    for (size_t s = 0; s < a.stats.size(); ++s) {
      EXPECT_EQ(a.stats[s].loss, p.stats[s].loss) << "step " << s;
      EXPECT_EQ(a.stats[s].grad_norm, p.stats[s].grad_norm) << "step " << s;
      EXPECT_EQ(a.stats[s].skipped, p.stats[s].skipped) << "step " << s;
      EXPECT_EQ(a.stats[s].loss_scale, p.stats[s].loss_scale) << "step " << s;
      EXPECT_GT(a.stats[s].grad_norm, 0.0);
    }
  }
}

// Per rank and step, k micro-batches, W = 4, K = 2: one world gather per unit of (W - 1) shards,
// and 2k - 1 gathers in the group of (K - 1) secondary shards of Psi_u / K elements each.
TEST(Hpz, BytesAndMemoryEqualTheFormulasAndThePlans) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks (2 nodes of 2)";
  const int K = 2, k = 2;
  EngineConfig c = make_config(K, 2);
  c.micro_batches = k;
  MlpModel model(MlpShape{}, 4, world().rank(), k);
  MemoryTracker tracker;
  Engine engine(model, world(), c, &tracker);
  ASSERT_NE(engine.hpz_communicator(), nullptr);
  EXPECT_EQ(engine.hpz_communicator()->size(), K);
  int64_t world_bytes = 0, group_bytes = 0;
  for (size_t u = 0; u < engine.num_units(); ++u) {
    const GroupLayout& l = engine.layout(u);
    world_bytes += 3 * l.shard_numel * 2;
    group_bytes += (2 * k - 1) * (K - 1) * (l.padded_numel / K) * 2;
  }
  const int ag = static_cast<int>(CollectiveKind::kAllGather);
  world().reset_counters();
  engine.hpz_communicator()->reset_counters();
  model.set_step(0);
  engine.step();
  EXPECT_EQ(world().counters().sent[ag], world_bytes);
  EXPECT_EQ(engine.hpz_communicator()->counters().sent[ag], group_bytes);
  CommConfig cc;
  cc.world = 4;
  cc.nodes = 2;
  cc.stage = ZeroStage::k3;
  cc.param_dtype = DType::kBF16;
  cc.grad_dtype = DType::kF32;
  cc.micro_batches = k;
  cc.align = layout_align(c);
  cc.zeropp.hpz_partition_size = K;
  const CommPlan cp = plan_communication(ModelDesc::from_model(model), cc, nullptr);
  int64_t world_predicted = 0, group_predicted = 0;
  for (const CommItem& it : cp.items) {
    if (it.kind != CollectiveKind::kAllGather) continue;
    (it.scope == CommScope::kHpzGroup ? group_predicted : world_predicted) +=
        it.intra_rank + it.inter_rank;
    if (it.scope == CommScope::kHpzGroup) {
      EXPECT_EQ(it.inter_rank, 0) << "left the node";
    }
  }
  EXPECT_EQ(world_predicted, world_bytes);
  EXPECT_EQ(group_predicted, group_bytes);
  testing::expect_plan_equals_tracker(model, c, 4, world().rank(), tracker,
                                      {MemCategory::kParams, MemCategory::kCommBuffers});
  int64_t secondary = 0;
  for (size_t u = 0; u < engine.num_units(); ++u) secondary += engine.layout(u).padded_numel;
  EXPECT_EQ(engine.planned_bytes(MemCategory::kParams), 2 * (secondary / 4) + 2 * (secondary / K));
}

TEST(Hpz, RefusedByNameWhereItCannotApply) {
  const int W = world().size();
  MlpModel model(MlpShape{}, W, world().rank(), 1);
  auto refusal = [&](const EngineConfig& c) {
    return error_of([&] { Engine e(model, world(), c); });
  };
  for (int stage = 0; stage <= 2; ++stage) {
    EngineConfig c = make_config(2, 0);
    c.stage = zero_stage_from_int(stage);
    EXPECT_NE(refusal(c).find("zero_hpz_partition_size keeps secondary shards of stage "
                              "3's gathered parameters: stage " +
                              std::to_string(stage)),
              std::string::npos);
  }
  EXPECT_NE(refusal(make_config(0, 0)).find("zero_hpz_partition_size 0 is not 1 (off) or more"),
            std::string::npos);
  // One node: node_size 0 (all ranks) or W.
  for (int node : {0, W}) {
    EXPECT_NE(refusal(make_config(2, node)).find("(hpZ) on one node"), std::string::npos)
        << refusal(make_config(2, node));
  }
  if (W == 4) {
    EXPECT_NE(refusal(make_config(4, 2))
                  .find("zero_hpz_partition_size 4 (hpZ) does not divide "
                        "the 2 ranks of a node"),
              std::string::npos);
    EngineConfig hsdp = make_config(2, 2);
    hsdp.shard_group_size = 2;
    EXPECT_NE(refusal(hsdp).find("with hybrid sharding (shard group size 2) is not implemented"),
              std::string::npos);
    EXPECT_NE(refusal(make_config(2, 3)).find("node_size 3 does not divide the world size 4"),
              std::string::npos);
  }
  EXPECT_EQ(refusal(make_config(1, 0)), "");  // off: nothing is checked
}

}  // namespace
}  // namespace zs
