// Hybrid sharding ([Note: hybrid sharding] in runtime/engine_config.h), run at 1, 2 and 4 ranks
// for every shard group size S that divides the world: results agree with flat sharding within
// fp32 rounding (bit for bit when S = 1 at stages 0-1, where the replica all-reduce is the flat
// reduction in the same rank order); stages 0-3 agree bit for bit inside a shard group; bytes per
// communicator and the memory plan equal the formulas; checkpoints move between hybrid and flat
// engines; bad sizes and ranks that disagree are refused with a message.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "collectives/mpi_communicator.h"
#include "collectives/topology.h"
#include "core/error.h"
#include "mlp_model.h"
#include "plan_check.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;

using testing::world;

// The shard group sizes below the world that divide it (S = world is flat sharding).
std::vector<int> hybrid_sizes() {
  std::vector<int> out;
  for (int s = 1; s < world().size(); ++s) {
    if (world().size() % s == 0) out.push_back(s);
  }
  return out;
}

MlpShape shape() {
  MlpShape s;
  s.width = 24;
  return s;
}

EngineConfig make_config(int stage, int shard_group, int micro_batches = 2) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = DType::kF32;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 10;
  c.optimizer.adamw.weight_decay = 0.1f;
  c.micro_batches = micro_batches;
  c.shard_group_size = shard_group;
  return c;
}

struct RunResult {
  std::vector<std::vector<float>> params;  // [unit, parameter] fp32 master values
  std::vector<double> losses, norms;
  uint64_t hash = 0;
};

RunResult train(const EngineConfig& c, int steps) {
  MlpModel model(shape(), world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    model.set_step(s);
    const StepStats st = engine.step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  for (size_t u = 0; u < engine.num_units(); ++u) {
    for (size_t p = 0; p < engine.param_specs(u).size(); ++p) {
      r.params.push_back(engine.gather_master_param(u, p));
    }
  }
  r.hash = engine.param_hash();
  return r;
}

// Hybrid against flat at every stage: losses, norms and parameters within fp32 rounding after
// four steps of AdamW (the two sums of each gradient element group the ranks differently).
TEST(HybridSharding, AgreesWithFlatWithinFp32Rounding) {
  for (int stage = 0; stage <= 3; ++stage) {
    const RunResult flat = train(make_config(stage, 0), 4);
    for (int S : hybrid_sizes()) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << ", shard group " << S);
      const RunResult h = train(make_config(stage, S), 4);
      for (size_t s = 0; s < flat.losses.size(); ++s) {
        EXPECT_NEAR(h.losses[s], flat.losses[s], 1e-6 * std::abs(flat.losses[s]));
        EXPECT_NEAR(h.norms[s], flat.norms[s], 1e-5 * flat.norms[s]);
      }
      double worst = 0.0;
      for (size_t u = 0; u < flat.params.size(); ++u) {
        ASSERT_EQ(h.params[u].size(), flat.params[u].size());
        for (size_t i = 0; i < flat.params[u].size(); ++i) {
          worst =
              std::max(worst, std::abs(static_cast<double>(h.params[u][i]) - flat.params[u][i]));
        }
      }
      EXPECT_LE(worst, 2e-6) << "largest parameter difference";
      // S = 1 at stages 0-1 (which add the micro-batches locally before reducing): the shard
      // group is one rank, and the replica all-reduce is the flat reduction in the same rank
      // order: the same bits. (Stages 2-3 reduce each micro-batch flat, but add them before the
      // replica all-reduce: another order.)
      if (S == 1 && stage <= 1) {
        EXPECT_EQ(h.hash, flat.hash);
      }
    }
  }
}

// The stage contract inside the shard group: with one micro-batch, stages 0-3 give the same bits.
TEST(HybridSharding, StagesAgreeBitwiseInsideTheShardGroup) {
  for (int S : hybrid_sizes()) {
    SCOPED_TRACE(::testing::Message() << "shard group " << S);
    const uint64_t ref = train(make_config(0, S, 1), 3).hash;
    for (int stage = 1; stage <= 3; ++stage) {
      EXPECT_EQ(train(make_config(stage, S, 1), 3).hash, ref) << "stage " << stage;
    }
  }
}

// Per communicator, the bytes of one step equal the formulas (communicator.h's ring counts):
// shard group of S ranks, replica group of R = n / S, per unit u with shard c_u = padded_u / S:
//   stage 3  all-gather (shard)   2k * sum_u (S-1) c_u P
//   2-3      reduce-scatter       k * sum_u (S-1) c_u G        (0-1: once, k = 1)
//   1-2      all-gather (update)  sum_u (S-1) c_u P
//   0        all-gather (grads)   sum_u (S-1) c_u G
//   all      all-reduce (replica) sum_u 2 ceil(c_u / R) G
//   world    the step statistics' all-reduce of 2 + U doubles and the update check's of one
//            double per trainable parameter, nothing else.
// The memory plan equals the tracker category by category, Adam's state being 8 sum_u c_u bytes.
TEST(HybridSharding, BytesAndMemoryEqualTheFormulas) {
  const int n = world().size();
  for (int S : hybrid_sizes()) {
    const int R = n / S;
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << ", shard group " << S);
      const EngineConfig c = make_config(stage, S);
      MlpModel model(shape(), n, world().rank(), c.micro_batches);
      MemoryTracker tracker;
      Engine engine(model, world(), c, &tracker);
      ASSERT_EQ(engine.shard_group_size(), S);
      ASSERT_EQ(engine.shard_group_rank(), world().rank() % S);
      ASSERT_EQ(engine.replica_index(), world().rank() / S);
      Communicator& shard = engine.shard_communicator();
      Communicator* replicas = engine.replica_communicator();
      ASSERT_EQ(replicas == nullptr, R == 1);
      const int64_t P = 4, G = 4, k = c.micro_batches;
      const size_t U = engine.num_units();
      int64_t c_sum = 0, replica = 0;
      for (size_t u = 0; u < U; ++u) {
        const int64_t cu = engine.layout(u).shard_numel;
        EXPECT_EQ(engine.layout(u).padded_numel, cu * S);
        c_sum += cu;
        replica += 2 * (R - 1) * ((cu + R - 1) / R) * G;
      }
      const int64_t ag = static_cast<int>(CollectiveKind::kAllGather);
      const int64_t rs = static_cast<int>(CollectiveKind::kReduceScatter);
      const int64_t ar = static_cast<int>(CollectiveKind::kAllReduce);
      int64_t want_ag = 0;
      if (stage == 3) want_ag = 2 * k * (S - 1) * c_sum * P;
      if (stage == 1 || stage == 2) want_ag = (S - 1) * c_sum * P;
      if (stage == 0) want_ag = (S - 1) * c_sum * G;
      const int64_t want_rs = (stage >= 2 ? k : 1) * (S - 1) * c_sum * G;
      world().reset_counters();
      shard.reset_counters();
      if (replicas) replicas->reset_counters();
      model.set_step(0);
      engine.step();
      EXPECT_EQ(shard.counters().sent[ag], want_ag);
      EXPECT_EQ(shard.counters().sent[rs], want_rs);
      EXPECT_EQ(shard.counters().sent[ar], 0);
      if (replicas) {
        EXPECT_EQ(replicas->counters().sent[ar], replica);
        EXPECT_EQ(replicas->counters().total_sent(), replica);
      }
      int64_t params = 0;  // the update check's flags
      for (size_t u = 0; u < U; ++u) params += static_cast<int64_t>(engine.param_specs(u).size());
      const int64_t stats = 2 * (n - 1) * ((2 + static_cast<int64_t>(U) + n - 1) / n) * 8 +
                            2 * (n - 1) * ((params + n - 1) / n) * 8;
      EXPECT_EQ(world().counters().sent[ar], stats);
      EXPECT_EQ(world().counters().total_sent(), stats);

      testing::expect_plan_equals_tracker(
          model, c, n, world().rank(), tracker,
          {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster, MemCategory::kOptimizer,
           MemCategory::kCommBuffers});
      // Adam's m and v: the whole groups at stage 0, the shard group's shard otherwise.
      const int64_t adam = stage == 0 ? 8 * c_sum * S : 8 * c_sum;
      EXPECT_EQ(tracker.current(MemCategory::kOptimizer), adam);
    }
  }
}

// A hybrid checkpoint holds one copy of the state (the first shard group's files); it resumes bit
// for bit in a hybrid engine of another stage, and loads into a flat engine with the same values.
TEST(HybridSharding, CheckpointsResumeAndMoveToFlat) {
  for (int S : hybrid_sizes()) {
    SCOPED_TRACE(::testing::Message() << "shard group " << S);
    const std::string dir = testing::shared_temp_dir("zs_hsdp_");
    const EngineConfig c = make_config(3, S, 1);
    MlpModel model(shape(), world().size(), world().rank(), 1);
    Engine straight(model, world(), c);
    std::string path;
    uint64_t saved_hash = 0;
    for (int s = 0; s < 4; ++s) {
      model.set_step(s);
      straight.step();
      if (s == 1) {
        path = save_checkpoint(straight, world(), dir);
        saved_hash = straight.param_hash();
      }
    }
    const CheckpointInfo info = read_checkpoint_info(path);
    EXPECT_EQ(info.step, 2);

    MlpModel model1(shape(), world().size(), world().rank(), 1);
    Engine resumed(model1, world(), make_config(1, S, 1));
    load_checkpoint(resumed, world(), path);
    EXPECT_EQ(resumed.param_hash(), saved_hash);
    for (int s = 2; s < 4; ++s) {
      model1.set_step(s);
      resumed.step();
    }
    EXPECT_EQ(resumed.param_hash(), straight.param_hash());

    MlpModel model2(shape(), world().size(), world().rank(), 1);
    Engine flat(model2, world(), make_config(3, 0, 1));
    load_checkpoint(flat, world(), path);
    EXPECT_EQ(flat.param_hash(), saved_hash);
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(dir);
  }
}

// On a (simulated) cluster, ZS_TEST_EXPECT_NODES=N: the job spans N nodes of L ranks in blocks,
// so shard groups of L ranks are the nodes and every replica all-reduce crosses the network.
// Training with them agrees with flat sharding as above (run there by the tests before).
TEST(HybridSharding, ShardGroupsAreTheNodesOnACluster) {
  const char* expect = std::getenv("ZS_TEST_EXPECT_NODES");
  if (expect == nullptr || *expect == 0) GTEST_SKIP() << "ZS_TEST_EXPECT_NODES is not set";
  auto& mpi = static_cast<MpiCommunicator&>(world());
  const NodeTopology topo = make_node_topology(mpi);
  ASSERT_EQ(topo.num_nodes, std::atoi(expect));
  ASSERT_EQ(world().rank(), topo.node_index * topo.local_size + topo.local_rank) << "not blocks";
  const EngineConfig c = make_config(3, topo.local_size);
  MlpModel model(shape(), world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c);
  EXPECT_EQ(engine.replica_index(), topo.node_index);
  EXPECT_EQ(engine.shard_group_rank(), topo.local_rank);
  const RunResult flat = train(make_config(3, 0), 3);
  const RunResult h = train(c, 3);
  for (size_t s = 0; s < flat.losses.size(); ++s) {
    EXPECT_NEAR(h.losses[s], flat.losses[s], 1e-6 * std::abs(flat.losses[s]));
  }
}

void expect_refused(const EngineConfig& c, const std::string& needle) {
  MlpModel model(shape(), world().size(), world().rank(), c.micro_batches);
  try {
    Engine engine(model, world(), c);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HybridSharding, BadSizesAndDisagreementAreRefused) {
  const int n = world().size();
  expect_refused(make_config(3, n + 1), "does not divide the");
  if (n == 4) expect_refused(make_config(3, 3), "shard group size 3 does not divide the 4 ranks");
  expect_refused(make_config(3, -1), "shard_group_size -1 is outside");
  if (n >= 2) {
    // Rank 0 asks for flat sharding, the others for shard groups of one rank.
    expect_refused(make_config(3, world().rank() == 0 ? 0 : 1), "shard_group_size");
  }
  PlanConfig pc;
  pc.engine = make_config(3, n + 1);
  pc.world = n;
  try {
    plan_memory(ModelDesc{}, pc);
    ADD_FAILURE() << "the planner accepted shard group " << n + 1;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zs
