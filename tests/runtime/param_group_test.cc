// ParamGroup's start/finish pairs and asserted transitions, and GatherSchedule's prefetch in the
// groups' visit order (run at 1, 2 and 4 ranks).
#include <mpi.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "runtime/gather_schedule.h"
#include "runtime/param_group.h"
#include "test_world.h"

namespace zs {
namespace {

using PS = ParamGroup::ParamState;
using GS = ParamGroup::GradState;

using testing::world;

struct Fixture {
  MemoryTracker tracker;
  std::vector<std::vector<ParamSpec>> specs;
  std::vector<ParamGroup> groups;

  // One group per entry of `numels` (each a list of parameter sizes), fp32 params and grads.
  Fixture(const std::vector<std::vector<int64_t>>& numels, int stage) {
    const ShardingPolicy policy = ShardingPolicy::for_stage(stage);
    const int N = world().size(), r = world().rank();
    groups.reserve(numels.size());
    for (size_t i = 0; i < numels.size(); ++i) {
      std::vector<ParamSpec> s;
      for (size_t p = 0; p < numels[i].size(); ++p) {
        s.push_back({"p" + std::to_string(p), {numels[i][p]}, Init::zeros(), true});
      }
      GroupLayout l = compute_group_layout(numels[i], N, 4);
      const int64_t pn = policy.shard_params ? l.shard_numel : l.padded_numel;
      const int64_t gn = policy.shard_grads ? l.shard_numel : l.padded_numel;
      Buffer params(4 * pn, MemCategory::kParams, &tracker);
      Buffer grads(4 * gn, MemCategory::kGrads, &tracker);
      // Element e of the padded group holds 1000 * group + e (this rank's part of it).
      const int64_t first = policy.shard_params ? l.shard_begin(r) : 0;
      for (int64_t e = 0; e < pn; ++e) params.as<float>()[e] = 1000.0f * i + (first + e);
      groups.emplace_back(static_cast<int>(i), "g" + std::to_string(i), std::move(s), l, policy,
                          DType::kF32, DType::kF32, r, std::move(params), std::move(grads), world(),
                          cpu_device_ops());
    }
  }
};

TEST(ParamGroup, GatherPairAndTransitions) {
  Fixture f({{5, 7}}, 3);
  ParamGroup& g = f.groups[0];
  std::vector<float> slot(static_cast<size_t>(g.layout().padded_numel), -1.0f);
  EXPECT_EQ(g.param_state(), PS::kSharded);
  EXPECT_THROW(g.wait_gather(), Error);  // nothing in flight
  EXPECT_THROW(g.release(), Error);      // not gathered
  g.start_gather(3, slot.data());
  EXPECT_EQ(g.param_state(), PS::kGathering);
  EXPECT_EQ(g.slot(), 3);
  EXPECT_THROW(g.start_gather(4, slot.data()), Error);  // already gathering
  std::span<const ParamView> v = g.wait_gather();
  EXPECT_EQ(g.param_state(), PS::kGathered);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].numel, 5);
  EXPECT_EQ(v[1].numel, 7);
  for (int64_t e = 0; e < 5; ++e) EXPECT_EQ(v[0].at(e), static_cast<float>(e));
  const int64_t off1 = g.layout().params[1].offset;
  for (int64_t e = 0; e < 7; ++e) EXPECT_EQ(v[1].at(e), static_cast<float>(off1 + e));
  EXPECT_EQ(g.release(), 3);
  EXPECT_EQ(g.param_state(), PS::kSharded);
  EXPECT_EQ(g.slot(), -1);
}

TEST(ParamGroup, ResidentReplicaIsAlwaysGathered) {
  Fixture f({{5, 7}}, 1);
  ParamGroup& g = f.groups[0];
  EXPECT_EQ(g.param_state(), PS::kGathered);
  EXPECT_EQ(g.views()[1].at(2), static_cast<float>(g.layout().params[1].offset + 2));
  std::vector<float> slot(static_cast<size_t>(g.layout().padded_numel));
  EXPECT_THROW(g.start_gather(0, slot.data()), Error);
  EXPECT_THROW(g.release(), Error);
}

// Sum over ranks r of (r + 1) * (e + 1) per micro-batch, two micro-batches.
void check_reduced(ParamGroup& g, float micro_batches) {
  const int N = world().size();
  const float ranks = N * (N + 1) / 2.0f;
  const float* shard = static_cast<const float*>(g.grad_shard());
  const int64_t begin = g.layout().shard_begin(world().rank());
  for (int64_t i = 0; i < g.layout().shard_numel; ++i) {
    EXPECT_EQ(shard[i], micro_batches * ranks * static_cast<float>(begin + i + 1)) << i;
  }
}

void fill_scratch(std::vector<float>& scratch) {
  for (size_t e = 0; e < scratch.size(); ++e) {
    scratch[e] = static_cast<float>((world().rank() + 1) * (e + 1));
  }
}

TEST(ParamGroup, ShardedReductionEveryMicroBatch) {
  Fixture f({{9, 3}}, 2);
  ParamGroup& g = f.groups[0];
  const size_t full = static_cast<size_t>(g.layout().padded_numel);
  std::vector<float> scratch(full), recv(static_cast<size_t>(g.layout().shard_numel));
  const ReduceLane lane{scratch.data(), nullptr, recv.data()};
  g.begin_step();
  EXPECT_THROW(g.finish_reduce(), Error);  // nothing in flight
  fill_scratch(scratch);
  g.start_reduce(lane, 0, 2);
  EXPECT_EQ(g.grad_state(), GS::kReducing);
  EXPECT_TRUE(g.lane_busy());
  EXPECT_THROW(g.start_reduce(lane, 1, 2), Error);  // the previous one is still in flight
  EXPECT_FALSE(g.finish_reduce());                  // not the step's last
  EXPECT_EQ(g.grad_state(), GS::kAccumulating);
  fill_scratch(scratch);
  g.start_reduce(lane, 1, 2);
  EXPECT_TRUE(g.finish_reduce());
  EXPECT_EQ(g.grad_state(), GS::kReduced);
  check_reduced(g, 2.0f);
  EXPECT_EQ(g.start_gather_reduced_grads(), nullptr);  // stage 2 keeps the shard only
}

TEST(ParamGroup, FullBufferReducesOnceAfterTheLastMicroBatch) {
  Fixture f({{9, 3}}, 0);
  ParamGroup& g = f.groups[0];
  std::vector<float> scratch(static_cast<size_t>(g.layout().padded_numel));
  const ReduceLane lane{scratch.data(), nullptr, nullptr};
  g.begin_step();
  fill_scratch(scratch);
  g.start_reduce(lane, 0, 2);
  EXPECT_EQ(g.grad_state(), GS::kAccumulating);  // summed locally, nothing sent yet
  EXPECT_FALSE(g.reducing());
  fill_scratch(scratch);
  g.start_reduce(lane, 1, 2);
  EXPECT_TRUE(g.reducing());
  EXPECT_FALSE(g.lane_busy());  // in place: the scratch is free again
  EXPECT_TRUE(g.finish_reduce());
  check_reduced(g, 2.0f);
  WorkHandle w = g.start_gather_reduced_grads();  // stage 0: every rank gets the whole sum
  ASSERT_NE(w, nullptr);
  w->wait();
  const float* all = static_cast<const float*>(g.update_grad());
  const int N = world().size();
  EXPECT_EQ(all[g.layout().padded_numel - 1],
            2.0f * N * (N + 1) / 2.0f * static_cast<float>(g.layout().padded_numel));
}

// Three sharded groups visited forward then backward with prefetch depth 2: the next two go in
// flight while one computes, and the last group is not prefetched for its backward while its
// forward still holds it.
TEST(GatherSchedule, PrefetchFollowsTheVisitOrder) {
  Fixture f({{8}, {8}, {8}}, 3);
  auto& g = f.groups;
  GatherSchedule s(3, 4 * g[0].layout().padded_numel, 2, &f.tracker, nullptr);
  std::vector<ParamGroup*> order = {&g[0], &g[1], &g[2], &g[2], &g[1], &g[0]};
  s.begin(order);
  EXPECT_THROW(s.acquire(g[1]), Error);  // not the next group of the order
  std::span<const ParamView> v = s.acquire(g[0]);
  EXPECT_EQ(v[0].at(7), 7.0f);
  EXPECT_EQ(g[1].param_state(), PS::kGathering);
  EXPECT_EQ(g[2].param_state(), PS::kGathering);
  s.release(g[0]);
  s.acquire(g[1]);
  s.release(g[1]);
  v = s.acquire(g[2]);
  EXPECT_EQ(v[0].at(3), 2003.0f);
  // Forward of g2 holds it: its backward visit cannot be prefetched, nor anything after it.
  EXPECT_EQ(g[1].param_state(), PS::kSharded);
  s.release(g[2]);
  s.acquire(g[2]);  // gathered again for the backward, and g1, g0 go in flight behind it
  EXPECT_EQ(g[1].param_state(), PS::kGathering);
  EXPECT_EQ(g[0].param_state(), PS::kGathering);
  s.release(g[2]);
  v = s.acquire(g[1]);
  EXPECT_EQ(v[0].at(0), 1000.0f);
  s.release(g[1]);
  s.finish();  // waits for g0's gather in flight and frees its slot
  EXPECT_EQ(g[0].param_state(), PS::kSharded);
  // A new sequence starts with every slot free.
  s.begin(order);
  s.acquire(g[0]);
  s.release(g[0]);
  s.finish();
}

TEST(GatherSchedule, ResidentGroupsNeedNoSlot) {
  Fixture f({{8}, {8}}, 2);
  GatherSchedule s(0, 0, 1, &f.tracker, nullptr);
  std::vector<ParamGroup*> order = {&f.groups[0], &f.groups[1]};
  s.begin(order);
  EXPECT_EQ(s.acquire(f.groups[0])[0].at(5), 5.0f);
  s.release(f.groups[0]);
  EXPECT_EQ(s.acquire(f.groups[1])[0].at(5), 1005.0f);
  s.release(f.groups[1]);
  s.finish();
}

}  // namespace
}  // namespace zs
