// ZeRO++ qgZ ([Note: quantized gradients] in runtime/quantized_reduce.h), run at 1, 2 and 4 ranks
// with every node size that divides the world: the reduced shard is within the derived bound of
// the exact fp32 sum, the same bits twice, rounded once to the gradient dtype, non-finite where a
// block held inf or NaN, and the bytes on each communicator equal the formula. In the engine
// (stages 2 and 3, nodes of 2 ranks where the world allows): deterministic, trains like the
// unquantized reduction, resumes bitwise, fp16 loss scaling and skips unchanged, bytes equal to
// zs_plan's communication model and memory to the planner's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/buffer.h"
#include "core/convert.h"
#include "mlp_model.h"
#include "plan_check.h"
#include "planner/comm_model.h"
#include "resume_check.h"
#include "runtime/engine.h"
#include "runtime/quantized_reduce.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::world;

// Rank r's fp32 gradient of n elements: uniform in [-1, 1] times a magnitude that changes from
// block to block (10^-3 .. 10^2), so blocks have very different scales. Every rank can make every
// rank's.
std::vector<float> gradient_of(int r, int64_t n, int64_t block) {
  std::mt19937 gen(1234 + 77 * r);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float mag = std::pow(10.0f, static_cast<float>((i / block * 7 + r) % 6) - 3.0f);
    g[static_cast<size_t>(i)] = u(gen) * mag;
  }
  return g;
}

// The node-local and cross-node communicators of node size L (block placement).
struct Comms {
  std::unique_ptr<Communicator> local, cross;
  explicit Comms(int L) {
    const int r = world().rank();
    local = world().split(r / L, r);
    cross = world().split(r % L, r);
  }
};

struct Reduced {
  QuantizedReduceLayout q;
  std::vector<float> out;  // this rank's reduced shard (fp32)
};

// Reduces `grads[rank]` with qgZ at node size L into dtype dt; returns this rank's shard as fp32
// (widened from dt).
Reduced reduce(const std::vector<std::vector<float>>& grads, const GroupLayout& l, int L,
               int64_t block, DType dt, Comms& c) {
  Reduced run;
  run.q = quantized_reduce_layout(l, L, block);
  Buffer lane(static_cast<size_t>(std::max<int64_t>(run.q.bytes, 64)), MemCategory::kCommBuffers);
  std::vector<char> out(static_cast<size_t>(l.shard_numel) * dtype_size(dt));
  WorkHandle w = start_quantized_reduce(run.q, grads[static_cast<size_t>(world().rank())].data(),
                                        static_cast<uint8_t*>(lane.data()), *c.local, *c.cross, dt,
                                        out.data());
  w->wait();
  run.out.resize(static_cast<size_t>(l.shard_numel));
  convert(out.data(), dt, run.out.data(), DType::kF32, run.out.size());
  return run;
}

float absmax(const std::vector<float>& x, int64_t begin, int64_t n) {
  float a = 0;
  for (int64_t i = begin; i < begin + n; ++i) a = std::max(a, std::abs(x[static_cast<size_t>(i)]));
  return a;
}

// The Note's bound for element j of shard w: sum over nodes of (sum over the node's ranks of
// A/254) + A'/254, with A' bounded by the exact partial's absmax plus its step-1 error; plus
// fp32 rounding of the sums (2^-20 of the magnitudes summed).
double bound_at(const std::vector<std::vector<float>>& g, int N, int L, int64_t c, int64_t block,
                int w, int64_t j) {
  const int64_t b0 = w * c + j / block * block;
  double total = 0, magnitude = 0;
  for (int k = 0; k < N; ++k) {
    double step1 = 0, partial_max = 0;
    for (int64_t i = b0; i < b0 + block; ++i) {
      double s = 0;
      for (int l = 0; l < L; ++l) s += g[static_cast<size_t>(k * L + l)][static_cast<size_t>(i)];
      partial_max = std::max(partial_max, std::abs(s));
    }
    for (int l = 0; l < L; ++l) {
      const double a = absmax(g[static_cast<size_t>(k * L + l)], b0, block);
      if (L > 1) step1 += a / 254;
      magnitude += a;
    }
    total += step1 + (N > 1 ? (partial_max + step1) / 254 : 0);
  }
  return total * (1 + 1e-5) + magnitude * std::ldexp(1.0, -20);
}

struct Case {
  int L;
  int64_t block;
};

// A group of `numel` elements over the world, blocks of k.block, and every rank's gradient.
struct Inputs {
  GroupLayout l;
  std::vector<std::vector<float>> g;
  Inputs(int64_t numel, const Case& k)
      : l(compute_group_layout(std::vector<int64_t>{numel}, world().size(), k.block)) {
    for (int r = 0; r < world().size(); ++r) g.push_back(gradient_of(r, l.padded_numel, k.block));
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int L : {1, 2, 4}) {
    if (world().size() % L != 0) continue;
    for (int64_t block : {32, 256}) out.push_back({L, block});
  }
  return out;
}

TEST(QuantizedReduce, WithinBoundOfExactSumAndDeterministic) {
  const int W = world().size(), me = world().rank();
  for (const Case& k : cases()) {
    Inputs in(3000, k);
    const GroupLayout& l = in.l;
    std::vector<std::vector<float>>& g = in.g;
    Comms c(k.L);
    const Reduced a = reduce(g, l, k.L, k.block, DType::kF32, c);
    const Reduced b = reduce(g, l, k.L, k.block, DType::kF32, c);
    const int N = W / k.L;
    double worst = 0, max_err = 0;
    for (int64_t j = 0; j < l.shard_numel; ++j) {
      double exact = 0;
      for (int r = 0; r < W; ++r) exact += g[static_cast<size_t>(r)][me * l.shard_numel + j];
      const double err = std::abs(a.out[static_cast<size_t>(j)] - exact);
      const double bound = bound_at(g, N, k.L, l.shard_numel, k.block, me, j);
      ASSERT_LE(err, bound) << "L " << k.L << " block " << k.block << " element " << j;
      worst = std::max(worst, err / bound);
      max_err = std::max(max_err, err);
      ASSERT_EQ(std::memcmp(&a.out[static_cast<size_t>(j)], &b.out[static_cast<size_t>(j)], 4), 0)
          << "not deterministic at " << j;
    }
    if (W > 1) {
      EXPECT_GT(max_err, 0.0) << "nothing was quantized";  // the path really quantizes
    }
    std::printf("rank %d: W %d L %d block %lld: max |err| %.3g, max err/bound %.3f\n", me, W, k.L,
                static_cast<long long>(k.block), max_err, worst);
  }
}

// The gradient dtype is rounded to once, at the end: bf16 output = bf16(fp32 output).
TEST(QuantizedReduce, RoundsOnceToTheGradientDtype) {
  for (const Case& k : cases()) {
    Inputs in(1000, k);
    const GroupLayout& l = in.l;
    std::vector<std::vector<float>>& g = in.g;
    Comms c(k.L);
    const Reduced f32 = reduce(g, l, k.L, k.block, DType::kF32, c);
    for (DType dt : {DType::kBF16, DType::kF16}) {
      const Reduced narrow = reduce(g, l, k.L, k.block, dt, c);
      std::vector<uint16_t> want(f32.out.size());
      std::vector<float> back(f32.out.size());
      convert(f32.out.data(), DType::kF32, want.data(), dt, want.size());
      convert(want.data(), dt, back.data(), DType::kF32, back.size());
      ASSERT_EQ(std::memcmp(back.data(), narrow.out.data(), 4 * back.size()), 0)
          << dtype_name(dt) << " L " << k.L;
    }
  }
}

// An inf or NaN in one rank's block makes that block of the reduced shard non-finite (every
// element: its scale is NaN), and only that block; one rank quantizes nothing (only the element).
TEST(QuantizedReduce, NonFiniteBlocksStayNonFinite) {
  const int W = world().size(), me = world().rank();
  for (const Case& k : cases()) {
    for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
      Inputs in(2000, k);
      const GroupLayout& l = in.l;
      std::vector<std::vector<float>>& g = in.g;
      // Rank W-1 puts `bad` into block 1 of every shard.
      for (int w = 0; w < W; ++w)
        g[static_cast<size_t>(W - 1)][w * l.shard_numel + k.block + 3] = bad;
      Comms c(k.L);
      const Reduced a = reduce(g, l, k.L, k.block, DType::kBF16, c);
      for (int64_t j = 0; j < l.shard_numel; ++j) {
        const bool in_bad_block = W == 1 ? j == k.block + 3 : j / k.block == 1;
        EXPECT_EQ(std::isfinite(a.out[static_cast<size_t>(j)]), !in_bad_block)
            << "rank " << me << " L " << k.L << " element " << j << " bad " << bad;
      }
    }
  }
}

TEST(QuantizedReduce, BytesEqualTheFormula) {
  const int W = world().size();
  for (const Case& k : cases()) {
    Inputs in(3000, k);
    const GroupLayout& l = in.l;
    std::vector<std::vector<float>>& g = in.g;
    Comms c(k.L);
    const int N = W / k.L;
    const Reduced a = reduce(g, l, k.L, k.block, DType::kF32, c);
    const int64_t chunk = l.shard_numel + 4 * l.shard_numel / k.block;
    const int a2a = static_cast<int>(CollectiveKind::kAllToAll);
    EXPECT_EQ(a.q.chunk_bytes, chunk);
    EXPECT_EQ(c.local->counters().sent[a2a], int64_t{k.L - 1} * N * chunk);
    EXPECT_EQ(c.local->counters().received[a2a], int64_t{k.L - 1} * N * chunk);
    EXPECT_EQ(c.cross->counters().sent[a2a], int64_t{N - 1} * chunk);
    EXPECT_EQ(c.cross->counters().received[a2a], int64_t{N - 1} * chunk);
    EXPECT_EQ(a.q.intra_bytes(), int64_t{k.L - 1} * N * chunk);
    EXPECT_EQ(a.q.cross_bytes(), int64_t{N - 1} * chunk);
    EXPECT_EQ(c.local->counters().calls[a2a], k.L > 1 ? 1 : 0);
    EXPECT_EQ(c.cross->counters().calls[a2a], N > 1 ? 1 : 0);
  }
}

TEST(QuantizedReduce, RefusesABlockThatDoesNotDivideTheShard) {
  const GroupLayout l = compute_group_layout(std::vector<int64_t>{100}, world().size(), 32);
  const std::string msg = testing::error_of([&] { quantized_reduce_layout(l, 1, 256); });
  EXPECT_NE(msg.find("zero_quantized_gradients_block 256"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// In the engine

using testing::MlpModel;
using testing::MlpShape;

int node_size() { return std::min(2, world().size()); }

EngineConfig engine_config(int stage, bool qgz, DType grad = DType::kF32) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = DType::kBF16;
  c.precision.grad_dtype = grad;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 12;
  c.node_size = node_size();
  c.zeropp.quantized_gradients = qgz;
  c.zeropp.quantized_gradients_block = 32;  // = the default alignment: plain runs lay out alike
  return c;
}

struct TrainRun {
  uint64_t hash = 0;
  std::vector<StepStats> stats;
};

TrainRun train(const EngineConfig& c, int steps) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c);
  TrainRun r;
  for (int s = 0; s < steps; ++s) {
    model.set_step(s);
    r.stats.push_back(engine.step());
  }
  r.hash = engine.param_hash();
  return r;
}

// The same bits twice; the last loss within 2% of the unquantized run's; a different run at
// more than one rank (the gradients were quantized), the same bits at one (nothing is).
TEST(QgzEngine, DeterministicAndTrainsLikeTheUnquantizedReduction) {
  for (int stage : {2, 3}) {
    for (int micro : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << ", micro-batches " << micro);
      EngineConfig q = engine_config(stage, true), plain = engine_config(stage, false);
      q.micro_batches = plain.micro_batches = micro;
      const TrainRun a = train(q, 12), b = train(q, 12), p = train(plain, 12);
      EXPECT_EQ(a.hash, b.hash);
      for (size_t s = 0; s < a.stats.size(); ++s) EXPECT_EQ(a.stats[s].loss, b.stats[s].loss);
      EXPECT_EQ(a.hash != p.hash, world().size() > 1);
      const double qa = a.stats.back().loss, pa = p.stats.back().loss;
      EXPECT_LT(std::fabs(qa - pa), 0.02 * pa);
      if (world().rank() == 0) {
        std::printf(
            "[qgZ, stage %d, %d micro-batches, node size %d] loss %.6f -> %.6f "
            "(unquantized: -> %.6f, %+.3f%%)\n",
            stage, micro, node_size(), a.stats.front().loss, qa, pa, 100.0 * (qa - pa) / pa);
      }
    }
  }
}

// fp16 compute with the dynamic loss scaler: the loss scale and the skipped steps (non-finite
// gradients) are the unquantized run's, the gradient norm within 5% at every step.
TEST(QgzEngine, Fp16LossScaleSkipsAndGradientNormAsUnquantized) {
  for (int stage : {2, 3}) {
    std::vector<StepStats> stats[2];
    for (int q = 0; q < 2; ++q) {
      EngineConfig c = engine_config(stage, q == 1);
      c.precision.param_dtype = DType::kF16;
      c.precision.grad_dtype = DType::kF16;
      c.loss_scale.dynamic = true;
      c.loss_scale.initial = 16777216.0f;  // overflows first: skipped steps
      c.loss_scale.growth_interval = 4;
      c.loss_scale_set = true;
      stats[q] = train(c, 12).stats;
    }
    double worst = 0.0;
    int skipped = 0;
    for (size_t s = 0; s < stats[0].size(); ++s) {
      const StepStats &p = stats[0][s], &q = stats[1][s];
      EXPECT_EQ(q.loss_scale, p.loss_scale) << "step " << s;
      EXPECT_EQ(q.skipped, p.skipped) << "step " << s;
      skipped += p.skipped;
      if (p.skipped) continue;
      EXPECT_GT(q.grad_norm, 0.0) << "step " << s;
      worst = std::max(worst, std::fabs(q.grad_norm - p.grad_norm) / p.grad_norm);
    }
    EXPECT_GT(skipped, 0) << "the run never overflowed: the skip path was not tested";
    EXPECT_LT(worst, 0.05);
    if (world().rank() == 0) {
      std::printf(
          "[qgZ, stage %d, fp16] %d skipped steps as unquantized, loss scale %g, largest "
          "gradient-norm difference %.3f%%\n",
          stage, skipped, stats[1].back().loss_scale, 100 * worst);
    }
  }
}

TEST(QgzEngine, ResumesBitwise) {
  for (int stage : {2, 3}) {
    SCOPED_TRACE(stage);
    testing::expect_resume_bitwise(engine_config(stage, true), "zs_qgz_");
  }
}

// Per rank and step, k reductions per unit: (L-1) N chunks within the node and (N-1) chunks
// across nodes, chunk = S + 4 S / B bytes; zs_plan's model says the same; the memory plan is
// the tracker's.
TEST(QgzEngine, BytesAndMemoryEqualTheFormulasAndThePlans) {
  const int n = world().size(), L = node_size(), N = n / L;
  for (DType grad : {DType::kF32, DType::kBF16}) {
    for (int stage : {2, 3}) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << " " << dtype_name(grad));
      EngineConfig c = engine_config(stage, true, grad);
      c.micro_batches = 2;
      MlpModel model(MlpShape{}, n, world().rank(), c.micro_batches);
      MemoryTracker tracker;
      Engine engine(model, world(), c, &tracker);
      int64_t chunks = 0;
      for (size_t u = 0; u < engine.num_units(); ++u) {
        const int64_t S = engine.layout(u).shard_numel;
        chunks += S + 4 * S / 32;
      }
      Communicator& local = *engine.node_local_communicator();
      Communicator& cross = *engine.cross_node_communicator();
      local.reset_counters();
      cross.reset_counters();
      model.set_step(0);
      engine.step();
      const int a2a = static_cast<int>(CollectiveKind::kAllToAll);
      const int64_t intra = local.counters().sent[a2a], inter = cross.counters().sent[a2a];
      EXPECT_EQ(intra, c.micro_batches * int64_t{L - 1} * N * chunks);
      EXPECT_EQ(inter, c.micro_batches * int64_t{N - 1} * chunks);
      CommConfig cc;
      cc.world = n;
      cc.nodes = N;
      cc.stage = c.stage;
      cc.param_dtype = DType::kBF16;
      cc.grad_dtype = grad;
      cc.micro_batches = c.micro_batches;
      cc.align = layout_align(c);
      cc.zeropp.quantized_gradients = true;
      cc.zeropp.quantized_gradients_block = 32;
      const CommPlan cp = plan_communication(ModelDesc::from_model(model), cc, nullptr);
      int64_t predicted_intra = 0, predicted_inter = 0;
      for (const CommItem& it : cp.items) {
        EXPECT_NE(it.kind, CollectiveKind::kReduceScatter) << it.what;
        if (it.kind != CollectiveKind::kAllToAll) continue;
        predicted_intra += it.intra_rank;
        predicted_inter += it.inter_rank;
      }
      EXPECT_EQ(predicted_intra, intra);
      EXPECT_EQ(predicted_inter, inter);
      testing::expect_plan_equals_tracker(
          model, c, n, world().rank(), tracker,
          {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster, MemCategory::kOptimizer,
           MemCategory::kCommBuffers});
    }
  }
}

TEST(QgzEngine, StagesZeroAndOneRefusedByName) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  for (int stage : {0, 1}) {
    const std::string msg =
        testing::error_of([&] { Engine e(model, world(), engine_config(stage, true)); });
    EXPECT_NE(msg.find("zero_quantized_gradients quantizes the reduce-scatter of sharded "
                       "gradients: stage " +
                       std::to_string(stage)),
              std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace zs
