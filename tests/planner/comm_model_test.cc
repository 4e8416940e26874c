// The communication model ([Note: communication model] in planner/comm_model.h) against bytes
// worked out by hand. The model: unit A = {1000, 24} (offsets 0 and 1024, end 1048), unit B =
// {4096}, align 32. Shards: s = 4: A round_up(262, 32) = 288, B 1024 (sum 1312); s = 2: A
// round_up(524, 32) = 544, B 2048 (sum 2592). Three parameters: the update check's all-reduce is of
// 3 fp64 padded to a multiple of the ranks, 4 at 2 and 4 ranks, as the step statistics.
#include <algorithm>

#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/comm_model.h"
#include "sharding/frozen_layout.h"

namespace zs {
namespace {

ModelDesc two_units() { return ModelDesc::from_units({{1000, 24}, {4096}}); }

CommConfig config(int world, int nodes, int stage, DType dt) {
  CommConfig c;
  c.world = world;
  c.nodes = nodes;
  c.stage = zero_stage_from_int(stage);
  c.param_dtype = c.grad_dtype = dt;
  return c;
}

const CommItem& find(const CommPlan& p, const std::string& what) {
  for (const CommItem& it : p.items) {
    if (it.what == what) return it;
  }
  ADD_FAILURE() << "no item '" << what << "'";
  static const CommItem none;
  return none;
}

LinkModel links() {
  LinkModel l;
  l.intra = {1e-6, 1e-9};
  l.inter = {1e-4, 1e-8};
  return l;
}

// 2 nodes x 2 ranks, flat, stage 3, bf16. Linear all-gather / all-to-all: each rank sends c*e to
// its 1 node peer and to the 2 ranks of the other node.
TEST(CommModel, FlatStage3TwoByTwo) {
  const CommPlan p = plan_communication(two_units(), config(4, 2, 3, DType::kBF16), nullptr);
  ASSERT_EQ(p.items.size(), 4u);
  const CommItem& ag = find(p, "param all-gather");
  EXPECT_EQ(ag.calls, 4);  // forward + backward, 2 units
  EXPECT_EQ(ag.scope, CommScope::kWorld);
  EXPECT_FALSE(ag.hierarchical);
  EXPECT_EQ(ag.intra_rank, 2 * 1312 * 2);      // 5248
  EXPECT_EQ(ag.inter_rank, 2 * 1312 * 2 * 2);  // 10496
  EXPECT_EQ(ag.intra_all, 4 * 5248);
  EXPECT_EQ(ag.inter_all, 4 * 10496);
  // Ring bound 3*c*e per rank and call; ranks 1 and 3 (local rank 1) send theirs across.
  EXPECT_EQ(ag.counted_inter_all, 2 * 3 * 2 * 2 * 1312);  // 31488
  EXPECT_EQ(ag.counted_intra_all, 31488);
  const CommItem& rs = find(p, "grad reduce-scatter");
  EXPECT_EQ(rs.calls, 2);
  EXPECT_EQ(rs.intra_rank, 1312 * 2);
  EXPECT_EQ(rs.inter_rank, 1312 * 2 * 2);
  EXPECT_EQ(rs.counted_inter_all, 2 * 3 * 2 * 1312);
  const CommItem& st = find(p, "step statistics");  // 4 fp64: all-to-all of 1, all-gather of 1
  EXPECT_EQ(st.intra_rank, 16);
  EXPECT_EQ(st.inter_rank, 32);
  EXPECT_EQ(st.counted_inter_all, 2 * 48);
  const CommItem& uc = find(p, "update check");  // 4 fp64: all-to-all of 1, all-gather of 1
  EXPECT_EQ(uc.calls, 1);
  EXPECT_EQ(uc.intra_rank, 16);
  EXPECT_EQ(uc.inter_rank, 32);
  EXPECT_EQ(uc.counted_inter_all, 2 * 48);
  EXPECT_EQ(p.intra_rank, 5248 + 2624 + 16 + 16);
  EXPECT_EQ(p.inter_rank, 10496 + 5248 + 32 + 32);
  EXPECT_EQ(p.inter_all, 4 * (10496 + 5248 + 32 + 32));
}

// The same through the HierarchicalCommunicator: the counters' table, and fp32 partials for the
// bf16 reduce-scatter; the blocking fp64 all-reduce crosses as one MPI_Allreduce pair.
TEST(CommModel, HierarchicalStage3TwoByTwo) {
  CommConfig c = config(4, 2, 3, DType::kBF16);
  c.hierarchical = true;
  const CommPlan p = plan_communication(two_units(), c, nullptr);
  const CommItem& ag = find(p, "param all-gather");
  EXPECT_TRUE(ag.hierarchical);
  EXPECT_EQ(ag.intra_rank, 2 * (1 * 2 * 1312 * 2));  // (L-1) N c e per call
  EXPECT_EQ(ag.inter_rank, 2 * (1 * 1312 * 2));      // (N-1) c e
  EXPECT_EQ(ag.counted_inter_all, ag.inter_all);
  const CommItem& rs = find(p, "grad reduce-scatter");
  EXPECT_EQ(rs.intra_rank, 1 * 2 * 1312 * 4);
  EXPECT_EQ(rs.inter_rank, 1312 * 4);
  const CommItem& st = find(p, "step statistics");  // p = 2 fp64
  EXPECT_EQ(st.intra_rank, 2 * 16);
  EXPECT_EQ(st.inter_rank, 16);
  EXPECT_EQ(st.counted_inter_all, 4 * 16);
  const CommItem& uc = find(p, "update check");  // 4 fp64: p = 2 as well
  EXPECT_EQ(uc.intra_rank, 2 * 16);
  EXPECT_EQ(uc.inter_rank, 16);
  EXPECT_EQ(p.inter_rank, 5248 + 5248 + 16 + 16);
}

// ZeRO++ qwZ, block 32 (align 32: the same shards): each all-gather sends c + 4c/32 bytes
// (A: 288 + 36 = 324, B: 1024 + 128 = 1152; sum 1476) instead of c bf16 elements; the rest is
// unchanged. Flat and hierarchical, 2 nodes x 2 ranks.
TEST(CommModel, QuantizedWeightsStage3TwoByTwo) {
  for (bool hier : {false, true}) {
    SCOPED_TRACE(hier);
    CommConfig c = config(4, 2, 3, DType::kBF16);
    c.hierarchical = hier;
    const CommPlan plain = plan_communication(two_units(), c, nullptr);
    c.zeropp.quantized_weights = true;
    c.zeropp.quantized_weights_block = 32;
    const CommPlan p = plan_communication(two_units(), c, nullptr);
    ASSERT_EQ(p.items.size(), 4u);
    const CommItem& ag = find(p, "qwZ all-gather");
    EXPECT_EQ(ag.calls, 4);
    EXPECT_EQ(ag.intra_rank, hier ? 2 * (2 * 1476) : 2 * 1476);
    EXPECT_EQ(ag.inter_rank, hier ? 2 * 1476 : 2 * 1476 * 2);
    const CommItem& rs = find(p, "grad reduce-scatter");
    EXPECT_EQ(rs.intra_rank, find(plain, "grad reduce-scatter").intra_rank);
    EXPECT_EQ(p.inter_rank - ag.inter_rank,
              plain.inter_rank - find(plain, "param all-gather").inter_rank);
  }
  CommConfig bad = config(4, 2, 2, DType::kBF16);
  bad.zeropp.quantized_weights = true;
  bad.zeropp.quantized_weights_block = 32;
  EXPECT_THROW(plan_communication(two_units(), bad, nullptr), Error);  // stage 2
  bad.stage = ZeroStage::k3;
  bad.zeropp.quantized_weights = true;
  bad.zeropp.quantized_weights_block = 64;  // does not divide align 32
  EXPECT_THROW(plan_communication(two_units(), bad, nullptr), Error);
}

// qgZ, block 32, 2 nodes x 2 ranks, stage 2: chunks of c + 4c/32 bytes (sum 1476 as above) in
// two all-to-alls instead of the reduce-scatter: N chunks to the other local rank, one to the
// other node; on one node of 4 only the first, to 3 peers.
TEST(CommModel, QuantizedGradientsAllToAlls) {
  auto has = [](const CommPlan& p, const std::string& what) {
    return std::any_of(p.items.begin(), p.items.end(),
                       [&](const CommItem& it) { return it.what == what; });
  };
  CommConfig c = config(4, 2, 2, DType::kBF16);
  c.zeropp.quantized_gradients = true;
  c.zeropp.quantized_gradients_block = 32;
  const CommPlan p = plan_communication(two_units(), c, nullptr);
  EXPECT_FALSE(has(p, "grad reduce-scatter"));
  const CommItem& intra = find(p, "qgZ intra-node all-to-all");
  EXPECT_EQ(intra.kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(intra.scope, CommScope::kNodeLocal);
  EXPECT_EQ(intra.calls, 2);
  EXPECT_EQ(intra.intra_rank, 2 * 1476);
  EXPECT_EQ(intra.inter_rank, 0);
  EXPECT_EQ(intra.counted_intra_all, 4 * 2 * 1476);
  EXPECT_FALSE(intra.overlappable);
  const CommItem& cross = find(p, "qgZ cross-node all-to-all");
  EXPECT_EQ(cross.scope, CommScope::kCrossNode);
  EXPECT_EQ(cross.inter_rank, 1476);
  EXPECT_EQ(cross.intra_rank, 0);
  EXPECT_EQ(cross.counted_inter_all, 4 * 1476);
  EXPECT_EQ(cross.counted_intra_all, 0);
  EXPECT_TRUE(cross.overlappable);
  c.nodes = 1;
  const CommPlan one = plan_communication(two_units(), c, nullptr);
  EXPECT_EQ(find(one, "qgZ intra-node all-to-all").intra_rank, 3 * 1476);
  EXPECT_FALSE(has(one, "qgZ cross-node all-to-all"));
  CommConfig bad = config(4, 2, 1, DType::kBF16);
  bad.zeropp.quantized_gradients = true;
  bad.zeropp.quantized_gradients_block = 32;
  EXPECT_THROW(plan_communication(two_units(), bad, nullptr), Error);  // stage 1
  bad.stage = ZeroStage::k3;
  bad.shard_group_size = 2;
  EXPECT_THROW(plan_communication(two_units(), bad, nullptr), Error);  // hybrid sharding
}

// HSDP, shard group = the node's 2 ranks: gathers and reduce-scatters stay on the node; the
// shard's all-reduce goes to the one replica on the other node (all-to-all + all-gather of
// ceil(c/2)).
TEST(CommModel, HybridShardingTwoByTwo) {
  CommConfig c = config(4, 2, 3, DType::kF32);
  c.shard_group_size = 2;
  const CommPlan p = plan_communication(two_units(), c, nullptr);
  const CommItem& ag = find(p, "param all-gather");
  EXPECT_EQ(ag.scope, CommScope::kShardGroup);
  EXPECT_EQ(ag.intra_rank, 2 * 2592 * 4);
  EXPECT_EQ(ag.inter_rank, 0);
  EXPECT_EQ(ag.counted_inter_all, 0);
  EXPECT_EQ(find(p, "grad reduce-scatter").inter_rank, 0);
  const CommItem& ar = find(p, "replica all-reduce");
  EXPECT_EQ(ar.calls, 2);
  EXPECT_EQ(ar.inter_rank, 2 * 272 * 4 + 2 * 1024 * 4);  // 10368 = the shard's bytes
  EXPECT_EQ(ar.intra_rank, 0);
  EXPECT_EQ(ar.counted_inter_all, 4 * 10368);
  EXPECT_EQ(p.inter_rank, 10368 + 32 + 32);  // the step statistics and the update check
  EXPECT_EQ(p.counted_inter_all, 4 * 10368 + 96 + 96);
}

// 2 nodes x 1 rank, stage 2, fp32, 2 micro-batches; with times.
TEST(CommModel, Stage2TwoNodesWithTimes) {
  CommConfig c = config(2, 2, 2, DType::kF32);
  c.micro_batches = 2;
  const LinkModel l = links();
  const CommPlan p = plan_communication(two_units(), c, &l);
  ASSERT_EQ(p.items.size(), 4u);
  EXPECT_EQ(find(p, "grad reduce-scatter").calls, 4);
  EXPECT_EQ(find(p, "grad reduce-scatter").inter_rank, 2 * 2592 * 4);
  EXPECT_EQ(find(p, "param re-gather").inter_rank, 2592 * 4);
  EXPECT_EQ(find(p, "step statistics").inter_rank, 32);  // MPI_Allreduce of 4 fp64
  EXPECT_EQ(find(p, "update check").inter_rank, 32);     // the same, of 3 padded to 4
  EXPECT_EQ(p.inter_rank, 31168);
  EXPECT_EQ(p.intra_rank, 0);
  EXPECT_EQ(p.counted_inter_all, 2 * 31168);
  // 8 calls, one alpha each, and beta over what the node sends (= the rank's bytes here).
  EXPECT_NEAR(p.time_s, 8 * 1e-4 + 1e-8 * 31168, 1e-12);
  EXPECT_NEAR(p.overlappable_s, 6 * 1e-4 + 1e-8 * 31104, 1e-12);
}

// Flat over both classes at once: the node link carries both ranks' inter-node bytes.
TEST(CommModel, FlatTimeIsTheSlowerClass) {
  const LinkModel l = links();
  const CommPlan p = plan_communication(two_units(), config(4, 2, 3, DType::kBF16), &l);
  // Unit A: node sends 2 ranks x 2 peers x 288 x 2 B = 2304; unit B 8192. Two calls each.
  EXPECT_NEAR(find(p, "param all-gather").time_s, 2 * (1e-4 + 2304e-8) + 2 * (1e-4 + 8192e-8),
              1e-12);
  CommConfig h = config(4, 2, 3, DType::kBF16);
  h.hierarchical = true;
  const CommPlan q = plan_communication(two_units(), h, &l);
  // Hierarchical: cross step (the node sends 2 x c e) then the node-local step (2 c e).
  const double a = (1e-4 + 2 * 576 * 1e-8) + (1e-6 + 1152 * 1e-9);
  const double b = (1e-4 + 2 * 2048 * 1e-8) + (1e-6 + 4096 * 1e-9);
  EXPECT_NEAR(find(q, "param all-gather").time_s, 2 * a + 2 * b, 1e-12);
}

TEST(CommModel, Stage0And1) {
  const CommPlan p0 = plan_communication(two_units(), config(2, 2, 0, DType::kF32), nullptr);
  EXPECT_EQ(find(p0, "grad reduce-scatter").calls, 2);
  EXPECT_EQ(find(p0, "grad all-gather").inter_rank, 2592 * 4);
  const CommPlan p1 = plan_communication(two_units(), config(2, 1, 1, DType::kF32), nullptr);
  EXPECT_EQ(find(p1, "param re-gather").intra_rank, 2592 * 4);
  EXPECT_EQ(p1.inter_rank, 0);
  const CommPlan one = plan_communication(two_units(), config(1, 1, 3, DType::kF32), nullptr);
  EXPECT_EQ(one.intra_rank + one.inter_rank, 0);
  EXPECT_TRUE(one.items.size() <= 2u);
}

// Frozen bytes: stage 3 gathers each unit's frozen byte shard with its parameters.
TEST(CommModel, FrozenGathers) {
  ModelDesc m = two_units();
  m.frozen = {{{1000, 10}}, {}};
  CommConfig c = config(2, 2, 3, DType::kBF16);
  c.frozen_storage = DType::kI8;
  const CommPlan p = plan_communication(m, c, nullptr);
  const std::vector<FrozenParamDesc> d = {{1000, 10}};
  const int64_t shard = compute_frozen_layout(d, DType::kI8, DType::kBF16, 2).bytes.shard_numel;
  const CommItem& f = find(p, "frozen all-gather");
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.inter_rank, 2 * shard);
  EXPECT_GT(shard, 0);
}

// [Note: tied parameters]: the owner unit A stays gathered from its forward to its backward, so
// stage 3 gathers it once per micro-batch; B (the borrower) twice.
TEST(CommModel, TiedOwnerGatheredOncePerMicroBatch) {
  ModelDesc m = two_units();
  TiedParam t;
  t.unit = 1;
  t.owner_unit = 0;
  t.numel = 1000;
  m.ties = {t};
  CommConfig c = config(4, 2, 3, DType::kBF16);
  c.micro_batches = 2;
  const CommItem& ag = find(plan_communication(m, c, nullptr), "param all-gather");
  EXPECT_EQ(ag.calls, 2 * 3);                          // A once, B twice, per micro-batch
  EXPECT_EQ(ag.intra_rank, 2 * (288 + 2 * 1024) * 2);  // one node peer, bf16
  const CommItem& plain = find(plan_communication(two_units(), c, nullptr), "param all-gather");
  EXPECT_EQ(plain.calls, 2 * 4);
}

TEST(CommModel, Errors) {
  EXPECT_THROW(plan_communication(two_units(), config(4, 3, 3, DType::kF32), nullptr), Error);
  CommConfig c = config(4, 2, 3, DType::kF32);
  c.shard_group_size = 3;
  EXPECT_THROW(plan_communication(two_units(), c, nullptr), Error);
  EXPECT_THROW(link_model_from_json({{"intra_node", {{"alpha_s", 1e-6}}}}), Error);
  EXPECT_THROW(load_link_model("/nonexistent/links.json"), Error);
  const LinkModel l =
      link_model_from_json({{"intra_node", {{"alpha_s", 1e-6}, {"beta_s_per_byte", 2e-10}}},
                            {"inter_node", {{"alpha_s", 5e-5}, {"beta_s_per_byte", 8.5e-9}}}});
  EXPECT_DOUBLE_EQ(l.inter.beta_s_per_byte, 8.5e-9);
}

}  // namespace
}  // namespace zs
