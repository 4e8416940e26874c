// [Note: world-invariant reduction] in runtime/engine_config.h: the same global step (M = 8
// micro-batches of 2 samples) at 1, 2, 4 and 8 ranks gives the same parameters to the bit. Run at
// 4 ranks (and 8): the smaller worlds are sub-communicators of the job, every rank runs each
// world size it belongs to. Covers stages 0-3, fp32/bf16/fp16 compute, offload, clipping, int8
// optimizer states, a frozen int8 base, hybrid sharding with one micro-batch; a checkpoint of one
// world size resumes at another to the same bits; the first parameter whose bits differ is named
// (and the default mode, which sums in another order, is seen to differ); bad settings refused.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "mlp_model.h"
#include "plan_check.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::error_of;
using testing::MlpModel;
using testing::MlpShape;
using testing::world;

constexpr int kGlobalMicroBatches = 8;

MlpShape shape() {
  MlpShape s;
  s.global_batch = 16;  // 8 micro-batches of 2 samples at every world size
  return s;
}

EngineConfig make_config(ZeroStage stage, DType compute) {
  EngineConfig c;
  c.stage = stage;
  c.precision.param_dtype = compute;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 20;
  c.clip_norm = 0.5f;  // active: the norm must be the same too
  c.world_invariant = true;
  return c;
}

// The world sizes this job can run: powers of two up to its size.
std::vector<int> world_sizes() {
  std::vector<int> w;
  for (int n = 1; n <= world().size(); n *= 2) w.push_back(n);
  return w;
}

// A run at `n` ranks (this rank's group of n consecutive ranks), k = M / n micro-batches.
struct Result {
  uint64_t hash = 0;
  std::vector<std::vector<float>> params;  // [unit * 2 + param]: the fp32 master
  std::vector<double> losses, norms;
  std::string saved;  // the checkpoint written, when asked
};

Result run(EngineConfig c, int n, int steps, const MlpShape& s = shape(),
           const std::string& save = "", const std::string& load = "", int first = 0) {
  std::unique_ptr<Communicator> comm = world().split(world().rank() / n, world().rank());
  c.micro_batches = kGlobalMicroBatches / n;
  MlpModel model(s, n, comm->rank(), c.micro_batches);
  Engine engine(model, *comm, c);
  if (!load.empty()) load_checkpoint(engine, *comm, load);
  Result r;
  for (int t = first; t < steps; ++t) {
    model.set_step(t);
    const StepStats st = engine.step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  if (!save.empty()) r.saved = save_checkpoint(engine, *comm, save);
  r.hash = engine.param_hash();
  for (size_t u = 0; u < engine.num_units(); ++u)
    for (size_t p = 0; p < engine.param_specs(u).size(); ++p)
      r.params.push_back(engine.gather_master_param(u, p));
  return r;
}

// "" when equal, else the first parameter and element whose bits differ.
std::string first_difference(const Result& a, const Result& b) {
  for (size_t p = 0; p < a.params.size(); ++p) {
    for (size_t i = 0; i < a.params[p].size(); ++i) {
      if (std::memcmp(&a.params[p][i], &b.params[p][i], sizeof(float)) != 0) {
        return "unit " + std::to_string(p / 2) + " parameter " + std::to_string(p % 2) +
               " element " + std::to_string(i) + ": " + std::to_string(a.params[p][i]) + " vs " +
               std::to_string(b.params[p][i]);
      }
    }
  }
  return "";
}

void expect_same_at_every_size(const EngineConfig& c, int steps, const MlpShape& s = shape()) {
  const Result ref = run(c, 1, steps, s);
  for (int n : world_sizes()) {
    if (n == 1) continue;
    const Result r = run(c, n, steps, s);
    EXPECT_EQ(first_difference(ref, r), "") << n << " ranks vs 1";
    EXPECT_EQ(r.hash, ref.hash) << n << " ranks vs 1";
    EXPECT_EQ(r.losses, ref.losses) << n << " ranks vs 1";
    EXPECT_EQ(r.norms, ref.norms) << n << " ranks vs 1";
  }
}

TEST(WorldInvariant, EveryStageAndDtypeGivesTheSameBitsAtEveryWorldSize) {
  uint64_t per_dtype[3] = {};
  int d = 0;
  for (DType compute : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(std::string(dtype_name(compute)) + " stage " + std::to_string(stage));
      const EngineConfig c = make_config(zero_stage_from_int(stage), compute);
      expect_same_at_every_size(c, 20);
      const uint64_t h = run(c, world().size(), 20).hash;
      if (stage == 0) per_dtype[d] = h;
      EXPECT_EQ(h, per_dtype[d]) << "stage " << stage << " vs stage 0";
    }
    ++d;
  }
}

TEST(WorldInvariant, OffloadInt8StatesAndFrozenInt8Base) {
  EngineConfig off = make_config(ZeroStage::k3, DType::kBF16);
  off.offload.optimizer = true;
  expect_same_at_every_size(off, 20);
  EXPECT_EQ(run(off, world().size(), 20).hash,
            run(make_config(ZeroStage::k3, DType::kBF16), world().size(), 20).hash)
      << "offload vs resident";
  EngineConfig q = make_config(ZeroStage::k2, DType::kBF16);
  q.optimizer.state_dtype = optim::StateDType::kI8;
  q.optimizer.state_min_numel = 64;
  expect_same_at_every_size(q, 20);
  MlpShape lora = shape();
  lora.frozen_mask = 0x55;  // the hidden weights frozen, stored int8
  EngineConfig f = make_config(ZeroStage::k3, DType::kBF16);
  f.frozen.storage = DType::kI8;
  f.frozen.int8_compute = FrozenPolicy::Int8Compute::kDequantize;
  expect_same_at_every_size(f, 20, lora);
}

TEST(WorldInvariant, ResumesAtAnotherWorldSize) {
  const std::string dir = testing::shared_temp_dir("zs_world_invariant_");
  const EngineConfig c = make_config(ZeroStage::k3, DType::kBF16);
  const int big = world().size();
  const Result straight = run(c, big, 20);
  const std::string path = run(c, big, 10, shape(), dir).saved;
  for (int n : world_sizes()) {
    const Result resumed = run(c, n, 20, shape(), "", path, 10);
    EXPECT_EQ(first_difference(straight, resumed), "") << "resumed at " << n << " ranks";
    EXPECT_EQ(resumed.hash, straight.hash) << "resumed at " << n << " ranks";
  }
}

TEST(WorldInvariant, NamesTheFirstDifferenceAndTheDefaultModeDiffers) {
  if (world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  EngineConfig plain = make_config(ZeroStage::k2, DType::kF32);
  plain.world_invariant = false;
  const Result a = run(plain, 1, 3), b = run(plain, 4, 3);
  const std::string diff = first_difference(a, b);
  EXPECT_NE(diff, "") << "the default mode's order is not world-invariant, yet nothing differs";
  if (world().rank() == 0) std::printf("default mode, 1 vs 4 ranks: %s\n", diff.c_str());
}

// With one micro-batch per rank (8 ranks, M = 8) hybrid sharding's two stages are the tree's
// levels over the shard group and over the replicas: the bits of 1 rank without it.
TEST(WorldInvariant, HybridShardingWithOneMicroBatch) {
  if (world().size() != kGlobalMicroBatches) GTEST_SKIP() << "needs 8 ranks (one micro-batch each)";
  EngineConfig h = make_config(ZeroStage::k3, DType::kBF16);
  h.shard_group_size = 2;
  const Result a = run(h, 8, 20), ref = run(make_config(ZeroStage::k3, DType::kBF16), 1, 20);
  EXPECT_EQ(first_difference(ref, a), "");
  EXPECT_EQ(a.hash, ref.hash);
}

TEST(WorldInvariant, BadSettingsRefusedByName) {
  MlpModel model(shape(), world().size(), world().rank(), 1);
  auto refusal = [&](EngineConfig c) { return error_of([&] { Engine e(model, world(), c); }); };
  EngineConfig c = make_config(ZeroStage::k3, DType::kBF16);
  c.micro_batches = 3;
  EXPECT_NE(refusal(c).find("world_invariant needs a power-of-two number of micro-batches per "
                            "rank, not 3"),
            std::string::npos);
  c.micro_batches = 1;
  c.precision.grad_dtype = DType::kBF16;
  EXPECT_NE(refusal(c).find("world_invariant needs fp32 gradients (grad_dtype bf16)"),
            std::string::npos);
  c.precision.grad_dtype = DType::kF32;
  c.zeropp.quantized_gradients = true;
  EXPECT_NE(refusal(c).find("world_invariant with zero_quantized_gradients (qgZ)"),
            std::string::npos);
  if (world().size() >= 4) {
    EngineConfig h = make_config(ZeroStage::k3, DType::kBF16);
    h.shard_group_size = 2;
    h.micro_batches = 2;
    EXPECT_NE(refusal(h).find("world_invariant with hybrid sharding (shard group size 2) needs "
                              "one micro-batch per rank, not 2"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace zs
