// ZeRO++ qwZ in the engine ([Note: quantized weights] in runtime/engine_config.h), run at 1, 2 and
// 4 ranks: the weights the units compute with are the exact ones within half a step of their
// block (plus the compute dtype's rounding); runs are deterministic, resume bitwise and train as
// plain ZeRO-3 does (the last loss within 2%); the bytes on the wire equal the formula and
// zs_plan's communication model, the memory the planner's; bad settings are refused by name.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/convert.h"
#include "core/error.h"
#include "core/state_quant.h"
#include "mlp_model.h"
#include "plan_check.h"
#include "planner/comm_model.h"
#include "resume_check.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::error_of;
using testing::MlpModel;
using testing::MlpShape;
using testing::world;

constexpr int64_t kBlock = 32;  // = the default alignment: the same layout as plain ZeRO-3

EngineConfig make_config(bool qwz, int64_t block = kBlock) {
  EngineConfig c;
  c.stage = ZeroStage::k3;
  c.precision.param_dtype = DType::kBF16;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 12;
  c.zeropp.quantized_weights = qwz;
  c.zeropp.quantized_weights_block = block;
  return c;
}

// A unit that records, at each forward, the values of the trainable parameters it was handed.
class RecordingUnit : public Unit {
 public:
  explicit RecordingUnit(Unit& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::vector<ParamSpec> param_specs() const override { return inner_.param_specs(); }
  void forward(std::span<const ParamView> params, const StepInfo& info) override {
    seen.assign(params.size(), {});
    for (size_t p = 0; p < params.size(); ++p) {
      for (int64_t e = 0; e < params[p].numel; ++e) seen[p].push_back(params[p].at(e));
    }
    inner_.forward(params, info);
  }
  void backward(std::span<const ParamView> params, GradViews& grads,
                const StepInfo& info) override {
    inner_.backward(params, grads, info);
  }
  std::vector<std::vector<float>> seen;  // [param][element] of the last forward

 private:
  Unit& inner_;
};

class RecordingModel : public Model {
 public:
  explicit RecordingModel(MlpModel& m) : m_(m) {
    for (size_t u = 0; u < m.num_units(); ++u)
      units_.push_back(std::make_unique<RecordingUnit>(m.unit(u)));
  }
  size_t num_units() const override { return units_.size(); }
  RecordingUnit& unit(size_t i) override { return *units_[i]; }
  void load_micro_batch(int index) override { m_.load_micro_batch(index); }
  double loss() const override { return m_.loss(); }

 private:
  MlpModel& m_;
  std::vector<std::unique_ptr<RecordingUnit>> units_;
};

// The largest |seen - exact| over the model, in units of (block absmax / 254) after taking off
// the bf16 rounding of the decoded value; exact = the bf16 cast of the fp32 master.
double max_error_in_half_steps(Engine& engine, RecordingModel& model, int64_t block) {
  double worst = 0.0;
  for (size_t u = 0; u < model.num_units(); ++u) {
    for (size_t p = 0; p < engine.param_specs(u).size(); ++p) {
      std::vector<float> exact = engine.gather_master_param(u, p);
      for (float& x : exact) x = bf16_bits_to_fp32(fp32_to_bf16_bits(x));
      const std::vector<float>& seen = model.unit(u).seen.at(p);
      EXPECT_EQ(seen.size(), exact.size());
      // The parameter starts at a multiple of the block: its blocks are its own.
      for (size_t b = 0; b < exact.size(); b += static_cast<size_t>(block)) {
        const size_t e = std::min(exact.size(), b + static_cast<size_t>(block));
        float amax = 0.0f;
        for (size_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(exact[i]));
        for (size_t i = b; i < e; ++i) {
          const double err = std::fabs(static_cast<double>(seen[i]) - exact[i]);
          const double bf16_half_ulp = std::ldexp(std::fabs(seen[i]), -8);
          if (amax > 0.0f) worst = std::max(worst, (err - bf16_half_ulp) / (amax / 254.0));
        }
      }
    }
  }
  return worst;
}

TEST(Qwz, GatheredWeightsWithinHalfAStepOfTheirBlock) {
  for (bool qwz : {false, true}) {
    SCOPED_TRACE(qwz);
    MlpModel mlp(MlpShape{}, world().size(), world().rank(), 1);
    RecordingModel model(mlp);
    Engine engine(model, world(), make_config(qwz));
    for (int s = 0; s < 3; ++s) {
      mlp.set_step(s);
      engine.step();
    }
    engine.forward();
    const double worst = max_error_in_half_steps(engine, model, kBlock);
    EXPECT_LE(worst, qwz ? 1.0 + 1e-5 : 0.0);
    // The head's weight as computed with differs from the exact one under qwZ, not without.
    std::vector<float> exact = engine.gather_master_param(model.num_units() - 1, 0);
    int differ = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const float x = bf16_bits_to_fp32(fp32_to_bf16_bits(exact[i]));
      differ += model.unit(model.num_units() - 1).seen[0][i] != x;
    }
    EXPECT_EQ(differ > 0, qwz) << differ << " elements differ";
    if (world().rank() == 0 && qwz) {
      std::printf(
          "[qwZ] largest error %.3f of half a step (bf16 rounding taken off); %d of %zu "
          "head weights differ from the exact bf16\n",
          worst, differ, exact.size());
    }
  }
}

// Round-trip error of weights through one book, block 256: RMS error / RMS of the weights, and
// the largest error / the block's absmax.
struct BookError {
  double rms = 0.0, max_of_absmax = 0.0;
};

BookError book_error(const std::vector<float>& w, StateCode code) {
  const int64_t n = static_cast<int64_t>(w.size()), block = 256;
  const StateCodeBook& book = state_code_book(code, /*is_signed=*/true);
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(static_cast<size_t>(state_num_blocks(n, block))), back(w.size());
  quantize_state_blockwise(w.data(), n, block, book, codes.data(), scales.data());
  dequantize_state_blockwise(codes.data(), scales.data(), n, block, book, back.data());
  double se = 0.0, sw = 0.0;
  BookError r;
  for (size_t i = 0; i < w.size(); ++i) {
    const double e = std::fabs(static_cast<double>(back[i]) - w[i]);
    se += e * e;
    sw += static_cast<double>(w[i]) * w[i];
    r.max_of_absmax = std::max(r.max_of_absmax, e / scales[i / block]);
  }
  r.rms = std::sqrt(se / sw);
  return r;
}

// [Note: quantized weights]: why the linear book. Weights are near-Gaussian within a block, so
// most elements sit well below the block's absmax, where linear's absolute step (absmax / 127)
// is finer than float8's relative one (1/8 of the binade; E4M3). Measured on N(0, 0.02) weights
// and on heavy-tailed ones (Student t with 3 degrees of freedom), block 256.
TEST(Qwz, LinearBookRoundTripsWeightsBetterThanFloat8) {
  std::mt19937 gen(29);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::student_t_distribution<float> heavy(3.0f);
  std::vector<float> gauss(1 << 18), tails(1 << 18);
  for (float& x : gauss) x = normal(gen);
  for (float& x : tails) x = 0.02f * heavy(gen);
  for (const auto& [name, w] : {std::pair{"gaussian", &gauss}, std::pair{"t3", &tails}}) {
    const BookError lin = book_error(*w, StateCode::kLinear);
    const BookError f8 = book_error(*w, StateCode::kFloat8);
    EXPECT_LT(lin.rms, f8.rms) << name;
    EXPECT_LE(lin.max_of_absmax, 0.5 / 127 * (1 + 1e-5)) << name;  // half a step
    if (world().rank() == 0) {
      std::printf(
          "[%s weights, block 256] relative RMS error: linear %.4f%%, float8 %.4f%%; "
          "largest error / absmax: linear %.5f, float8 %.5f\n",
          name, 100 * lin.rms, 100 * f8.rms, lin.max_of_absmax, f8.max_of_absmax);
    }
  }
}

struct QwzRun {
  uint64_t hash = 0;
  std::vector<double> losses;
};

QwzRun train(const EngineConfig& c, int n) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), c.micro_batches);
  Engine engine(model, world(), c);
  QwzRun r;
  for (int s = 0; s < n; ++s) {
    model.set_step(s);
    r.losses.push_back(engine.step().loss);
  }
  r.hash = engine.param_hash();
  return r;
}

TEST(Qwz, DeterministicAndTrainsLikePlainZero3) {
  for (int micro : {1, 2}) {
    SCOPED_TRACE(micro);
    EngineConfig q = make_config(true), plain = make_config(false);
    q.micro_batches = plain.micro_batches = micro;
    const QwzRun a = train(q, 12), b = train(q, 12), p = train(plain, 12);
    EXPECT_EQ(a.hash, b.hash);
    EXPECT_EQ(a.losses, b.losses);
    EXPECT_NE(a.hash, p.hash) << "qwZ changed nothing";
    EXPECT_LT(std::fabs(a.losses.back() - p.losses.back()), 0.02 * p.losses.back());
    if (world().rank() == 0) {
      std::printf("[qwZ, %d micro-batches] loss %.6f -> %.6f (plain ZeRO-3: -> %.6f, %+.3f%%)\n",
                  micro, a.losses.front(), a.losses.back(), p.losses.back(),
                  100.0 * (a.losses.back() - p.losses.back()) / p.losses.back());
    }
  }
}

// fp16 compute with the dynamic loss scaler: the loss scale and the skipped steps are plain
// ZeRO-3's, the gradient norm within 5% at every step (measured: 1.9% at most, the tiny MLP's
// weights in blocks of 32; issue 29: DeepSpeed's qwZ showed a norm stuck at 0 and losses going
// to infinity).
TEST(Qwz, Fp16LossScaleSkipsAndGradientNormAsPlainZero3) {
  std::vector<StepStats> stats[2];
  for (int q = 0; q < 2; ++q) {
    EngineConfig c = make_config(q == 1);
    c.precision.param_dtype = DType::kF16;
    MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
    Engine engine(model, world(), c);
    for (int s = 0; s < 12; ++s) {
      model.set_step(s);
      stats[q].push_back(engine.step());
    }
  }
  double worst = 0.0;
  for (size_t s = 0; s < stats[0].size(); ++s) {
    const StepStats &p = stats[0][s], &q = stats[1][s];
    EXPECT_EQ(q.loss_scale, p.loss_scale) << "step " << s;
    EXPECT_EQ(q.skipped, p.skipped) << "step " << s;
    EXPECT_GT(q.grad_norm, 0.0) << "step " << s;
    worst = std::max(worst, std::fabs(q.grad_norm - p.grad_norm) / p.grad_norm);
  }
  EXPECT_LT(worst, 0.05);
  if (world().rank() == 0) {
    std::printf("[qwZ, fp16] loss scale %g, largest gradient-norm difference %.3f%%\n",
                stats[1].back().loss_scale, 100 * worst);
  }
}

TEST(Qwz, ResumesBitwise) { testing::expect_resume_bitwise(make_config(true), "zs_qwz_"); }

int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

// Per rank and step: 2k all-gathers per unit of (n - 1) chunks of S + 4 S / B bytes (int8 codes
// and fp32 scales) instead of (n - 1) S bf16 elements; the gather slots grow by the chunks.
TEST(Qwz, BytesAndMemoryEqualTheFormulasAndThePlans) {
  const int n = world().size();
  for (int64_t block : {int64_t{32}, int64_t{64}}) {
    SCOPED_TRACE(block);
    EngineConfig c = make_config(true, block);
    c.micro_batches = 2;
    MlpModel model(MlpShape{}, n, world().rank(), c.micro_batches);
    MemoryTracker tracker;
    Engine engine(model, world(), c, &tracker);
    int64_t gather = 0, slot = 0, plain_slot = 0;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      const GroupLayout& l = engine.layout(u);
      EXPECT_EQ(l.align, std::max<int64_t>(32, block)) << "lcm(align 32, block)";
      const int64_t S = l.shard_numel;
      EXPECT_EQ(S % block, 0);
      gather += (n - 1) * (S + 4 * S / block);
      slot = std::max(slot, round64(2 * l.padded_numel) + n * (S + 4 * S / block));
      plain_slot = std::max(plain_slot, 2 * l.padded_numel);
    }
    world().reset_counters();
    model.set_step(0);
    engine.step();
    const int64_t sent = world().counters().sent[static_cast<int>(CollectiveKind::kAllGather)];
    EXPECT_EQ(sent, 2 * c.micro_batches * gather);
    // zs_plan's communication model predicts the same bytes.
    CommConfig cc;
    cc.world = n;
    cc.stage = ZeroStage::k3;
    cc.param_dtype = DType::kBF16;
    cc.grad_dtype = DType::kF32;
    cc.micro_batches = c.micro_batches;
    cc.align = layout_align(c);
    cc.zeropp.quantized_weights = true;
    cc.zeropp.quantized_weights_block = block;
    const CommPlan cp = plan_communication(ModelDesc::from_model(model), cc, nullptr);
    int64_t predicted = 0;
    for (const CommItem& it : cp.items) {
      if (it.kind == CollectiveKind::kAllGather) predicted += it.intra_rank;
    }
    EXPECT_EQ(predicted, sent);
    // Memory: the planner's figures are the tracker's; the slots grew by the chunks.
    testing::expect_plan_equals_tracker(
        model, c, n, world().rank(), tracker,
        {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster, MemCategory::kOptimizer,
         MemCategory::kCommBuffers});
    EngineConfig off = c;
    off.zeropp.quantized_weights = false;
    off.align = layout_align(c);  // the same layout
    MlpModel plain_model(MlpShape{}, n, world().rank(), c.micro_batches);
    MemoryTracker plain_tracker;
    Engine plain(plain_model, world(), off, &plain_tracker);
    EXPECT_EQ(tracker.current(MemCategory::kCommBuffers) -
                  plain_tracker.current(MemCategory::kCommBuffers),
              (c.prefetch + 1) * (slot - plain_slot));
  }
}

// Frozen parameters ride in the same slot, before the chunks: an int8 frozen base with trainable
// biases (a LoRA-like split) trains, deterministically, and the plan stays exact.
TEST(Qwz, WithFrozenParametersInTheSlot) {
  MlpShape shape;
  shape.frozen_mask = 0x55;  // every hidden unit's weight
  EngineConfig c = make_config(true);
  c.frozen.storage = DType::kI8;
  c.frozen.int8_compute = FrozenPolicy::Int8Compute::kDequantize;
  uint64_t hash[2] = {};
  for (uint64_t& h : hash) {
    MlpModel model(shape, world().size(), world().rank(), 1);
    MemoryTracker tracker;
    Engine engine(model, world(), c, &tracker);
    for (int s = 0; s < 4; ++s) {
      model.set_step(s);
      engine.step();
    }
    h = engine.param_hash();
    testing::expect_plan_equals_tracker(
        model, c, world().size(), world().rank(), tracker,
        {MemCategory::kParams, MemCategory::kFrozen, MemCategory::kCommBuffers});
  }
  EXPECT_EQ(hash[0], hash[1]);
}

// With hybrid sharding the quantized gathers run inside the shard group (4 ranks: 2 groups of 2).
TEST(Qwz, HybridShardingGathersWithinTheShardGroup) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  EngineConfig c = make_config(true), plain = make_config(false);
  c.shard_group_size = plain.shard_group_size = 2;
  const QwzRun a = train(c, 12), b = train(c, 12), p = train(plain, 12);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.hash, p.hash);
  EXPECT_LT(std::fabs(a.losses.back() - p.losses.back()), 0.02 * p.losses.back());
  MlpModel model(MlpShape{}, 4, world().rank(), 1);
  Engine engine(model, world(), c);
  int64_t gather = 0;
  for (size_t u = 0; u < engine.num_units(); ++u) {
    const int64_t S = engine.layout(u).shard_numel;
    gather += S + 4 * S / kBlock;  // to the one other member of the shard group
  }
  engine.shard_communicator().reset_counters();
  model.set_step(0);
  engine.step();
  EXPECT_EQ(
      engine.shard_communicator().counters().sent[static_cast<int>(CollectiveKind::kAllGather)],
      2 * gather);
}

TEST(Qwz, BadSettingsRefusedByName) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  for (int stage = 0; stage <= 2; ++stage) {
    EngineConfig c = make_config(true);
    c.stage = zero_stage_from_int(stage);
    const std::string msg = error_of([&] { Engine e(model, world(), c); });
    EXPECT_NE(msg.find("zero_quantized_weights quantizes stage 3's"), std::string::npos) << msg;
  }
  for (int64_t block : {int64_t{0}, int64_t{16}, int64_t{48}, int64_t{1} << 17}) {
    const std::string msg = error_of([&] { Engine e(model, world(), make_config(true, block)); });
    EXPECT_EQ(msg, fmt::format("zero_quantized_weights_block {} is not a power of two in "
                               "32..65536",
                               block));
  }
  // qwZ off: the block is not looked at.
  EXPECT_EQ(error_of([&] { Engine e(model, world(), make_config(false, 48)); }), "");
  if (world().size() < 2) return;
  // Ranks that disagree: named on every rank.
  const EngineConfig c = make_config(world().rank() != 1);
  const std::string msg = error_of([&] { Engine e(model, world(), c); });
  EXPECT_NE(msg.find("ranks disagree on zero_quantized_weights: 1 on rank 0, 0 on rank 1"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zs
