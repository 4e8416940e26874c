// ReduceSchedule: the lanes' turn order, oldest-first finishing, the gradients' sums, and the
// replica stage issued once per group and step (run at 1, 2 and 4 ranks).
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "runtime/reduce_schedule.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::world;

// A replica communicator of two ranks that records what is started on it and moves nothing.
class RecordingReplicas final : public Communicator {
 public:
  explicit RecordingReplicas(std::vector<std::string>& log) : log_(log) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_gather(const void*, void*, size_t, DType) override { log_.push_back("?"); }
  void reduce_scatter(const void*, void*, size_t, DType, ReduceOp) override { log_.push_back("?"); }
  void all_reduce(const void*, void*, size_t, DType, ReduceOp) override { log_.push_back("?"); }
  void broadcast(void*, size_t, DType, int) override { log_.push_back("?"); }
  void barrier() override {}
  void all_to_all(const void*, void*, size_t, DType) override { log_.push_back("?"); }
  WorkHandle start_all_to_all(const void*, void*, size_t, DType) override { return nullptr; }
  WorkHandle start_all_gather(const void*, void*, size_t, DType) override { return nullptr; }
  WorkHandle start_reduce_scatter(const void*, void*, size_t, DType, ReduceOp) override {
    return nullptr;
  }
  WorkHandle start_all_reduce(const void* s, void* r, size_t n, DType, ReduceOp) override {
    EXPECT_EQ(s, r);  // in place
    log_.push_back("replica " + std::to_string(n));
    return std::make_unique<Done>(log_);
  }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  const ByteCounters& counters() const override { return counters_; }
  void reset_counters() override {}

 private:
  struct Done final : Work {
    explicit Done(std::vector<std::string>& log) : log(log) {}
    void wait() override { log.push_back("replica done"); }
    bool test() override { return true; }
    std::vector<std::string>& log;
  };
  std::vector<std::string>& log_;
  ByteCounters counters_;
};

// Groups of fp32 parameters of the given sizes at `stage`, and a schedule over them whose
// on_final writes "final <group>" into `log`.
struct Rig {
  MemoryTracker tracker;
  std::vector<ParamGroup> groups;
  BufferPlan plan;
  std::vector<std::string> log;
  std::unique_ptr<RecordingReplicas> replicas;
  std::unique_ptr<ReduceSchedule> sched;

  Rig(const std::vector<int64_t>& numels, int stage, int micro, bool with_replicas = false) {
    const ShardingPolicy policy = ShardingPolicy::for_stage(stage);
    const int N = world().size(), r = world().rank();
    groups.reserve(numels.size());
    for (size_t i = 0; i < numels.size(); ++i) {
      std::vector<ParamSpec> s{{"w", {numels[i]}, Init::zeros(), true}};
      GroupLayout l = compute_group_layout(std::vector<int64_t>{numels[i]}, N, 4);
      plan.max_padded_numel = std::max(plan.max_padded_numel, l.padded_numel);
      plan.max_shard_numel = std::max(plan.max_shard_numel, l.shard_numel);
      const int64_t pn = policy.shard_params ? l.shard_numel : l.padded_numel;
      const int64_t gn = policy.shard_grads ? l.shard_numel : l.padded_numel;
      groups.emplace_back(static_cast<int>(i), "g" + std::to_string(i), std::move(s), l, policy,
                          DType::kF32, DType::kF32, r,
                          Buffer(4 * pn, MemCategory::kParams, &tracker),
                          Buffer(4 * gn, MemCategory::kGrads, &tracker), world(), cpu_device_ops());
    }
    // As plan_engine_buffers() sizes them for fp32 gradients.
    plan.grad_scratch_count = stage >= 2 ? 2 : 1;
    plan.grad_scratch_bytes = 4 * plan.max_padded_numel;
    plan.recv_count = stage >= 2 && micro > 1 ? 2 : 0;
    plan.recv_bytes = 4 * plan.max_shard_numel;
    if (with_replicas) replicas = std::make_unique<RecordingReplicas>(log);
    ReduceSchedule::Config c;
    c.plan = &plan;
    c.two_lanes = policy.shard_grads;
    c.micro_batches = micro;
    c.groups = groups;
    c.replicas = replicas.get();
    c.ops = &cpu_device_ops();
    c.tracker = &tracker;
    c.on_final = [this](ParamGroup& g) { log.push_back("final " + g.name()); };
    sched = std::make_unique<ReduceSchedule>(std::move(c));
  }

  // The backward of group u: every element of its gradient is rank + 1. Returns the scratch the
  // views addressed.
  const float* backward(size_t u, int micro, int micro_batches) {
    ParamGroup& g = groups[u];
    GradViews& gv = sched->acquire(g);
    float* p = gv.grad(0);
    for (int64_t e = 0; e < gv.numel(0); ++e) p[e] = static_cast<float>(world().rank() + 1);
    sched->start(g, micro, micro_batches);
    return p;
  }
};

// The sum over ranks of rank + 1, times the micro-batches.
float expected_sum(int micro) {
  const int N = world().size();
  return static_cast<float>(micro * N * (N + 1) / 2);
}

TEST(ReduceSchedule, TwoLanesTakeTurnsAndTheOldestFinishesFirst) {
  Rig rig({10, 6, 8}, 2, 1);
  ASSERT_EQ(rig.sched->lanes(), 2u);
  EXPECT_NE(rig.sched->lane(0).scratch, rig.sched->lane(1).scratch);
  EXPECT_EQ(rig.backward(2, 0, 1), rig.sched->lane(0).scratch);
  EXPECT_EQ(rig.backward(1, 0, 1), rig.sched->lane(1).scratch);
  EXPECT_EQ(rig.sched->in_flight(), 2u);
  EXPECT_TRUE(rig.log.empty());
  // Lane 0 again: group 2's reduction, the oldest, is finished first, and only it.
  EXPECT_EQ(rig.backward(0, 0, 1), rig.sched->lane(0).scratch);
  EXPECT_EQ(rig.log, (std::vector<std::string>{"final g2"}));
  EXPECT_EQ(rig.sched->in_flight(), 2u);
  rig.sched->finish_all();
  EXPECT_EQ(rig.log, (std::vector<std::string>{"final g2", "final g1", "final g0"}));
  EXPECT_EQ(rig.sched->in_flight(), 0u);
  for (ParamGroup& g : rig.groups) {
    EXPECT_EQ(g.grad_state(), ParamGroup::GradState::kReduced);
    const GroupLayout& l = g.layout();
    const int64_t valid = std::min(l.shard_numel, l.numel - l.shard_begin(world().rank()));
    const float* shard = static_cast<const float*>(g.grad_shard());
    for (int64_t e = 0; e < valid; ++e) ASSERT_EQ(shard[e], expected_sum(1)) << g.name();
  }
  // The next step starts at lane 0 again.
  for (ParamGroup& g : rig.groups) g.begin_step();
  EXPECT_EQ(rig.backward(2, 0, 1), rig.sched->lane(0).scratch);
  rig.sched->finish_all();
}

TEST(ReduceSchedule, MicroBatchesAccumulateInTheShard) {
  Rig rig({10, 6}, 3, 2);
  rig.backward(1, 0, 2);
  rig.backward(0, 0, 2);
  // Group 1's second micro-batch needs lane 0, held by its own first reduction.
  rig.backward(1, 1, 2);
  rig.backward(0, 1, 2);
  rig.sched->finish_all();
  EXPECT_EQ(rig.log, (std::vector<std::string>{"final g1", "final g0"}));
  for (ParamGroup& g : rig.groups) {
    const float* shard = static_cast<const float*>(g.grad_shard());
    const int64_t valid =
        std::min(g.layout().shard_numel, g.layout().numel - g.layout().shard_begin(world().rank()));
    for (int64_t e = 0; e < valid; ++e) ASSERT_EQ(shard[e], expected_sum(2)) << g.name();
  }
}

TEST(ReduceSchedule, FullBufferUsesOneLaneAndReducesOncePerStep) {
  Rig rig({10, 6, 8}, 1, 2);
  ASSERT_EQ(rig.sched->lanes(), 1u);
  for (int m = 0; m < 2; ++m) {
    for (size_t u = 3; u-- > 0;) EXPECT_EQ(rig.backward(u, m, 2), rig.sched->lane(0).scratch);
    // The first micro-batch only folds; the last starts every group's in-place reduce-scatter.
    EXPECT_EQ(rig.sched->in_flight(), m == 0 ? 0u : 3u);
  }
  EXPECT_TRUE(rig.log.empty());
  rig.sched->finish_all();
  EXPECT_EQ(rig.log, (std::vector<std::string>{"final g2", "final g1", "final g0"}));
}

TEST(ReduceSchedule, ReplicaStageOncePerGroupAfterItsLastReduction) {
  Rig rig({10, 6}, 2, 2, /*with_replicas=*/true);
  for (int m = 0; m < 2; ++m) {
    rig.backward(1, m, 2);
    rig.backward(0, m, 2);
  }
  rig.sched->finish_all();
  const std::string n1 = std::to_string(rig.groups[1].layout().shard_numel);
  const std::string n0 = std::to_string(rig.groups[0].layout().shard_numel);
  // Each group's replica all-reduce starts when its last reduce-scatter is finished, joins the
  // back of the queue, and the gradient is final only once it is done.
  EXPECT_EQ(rig.log, (std::vector<std::string>{"replica " + n1, "replica " + n0, "replica done",
                                               "final g1", "replica done", "final g0"}));
}

TEST(ReduceSchedule, StartNeedsAnAcquire) {
  Rig rig({10}, 2, 1);
  EXPECT_THROW(rig.sched->start(rig.groups[0], 0, 1), Error);
  rig.sched->acquire(rig.groups[0]);
  EXPECT_THROW(rig.sched->acquire(rig.groups[0]), Error);  // acquired, not started
  EXPECT_THROW(rig.sched->finish_all(), Error);
}

}  // namespace
}  // namespace zs
