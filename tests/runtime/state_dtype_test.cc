// Narrow AdamW states in the engine ([Note: optimizer state storage] in runtime/state_storage.h),
// run at 1, 2 and 4 ranks: bf16 and int8 states give the same bits at stages 0-3 and offloaded;
// each differs from fp32 states and trains as they do (the last loss within 1%); parameters under
// the threshold keep fp32 states (the tracker's bytes against the formula, computed here from the
// layout, the largest over the ranks), and so do parameters named by OptimizerConfig::state_fp32
// (the memory planner agrees; a pattern that matches no trainable parameter is refused); the
// decoded view (shard_state) re-encodes to the same decoded values, so a copy of the state resumes
// bitwise, also for blocks whose products are subnormal; bad settings are refused by name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/state_quant.h"
#include "mlp_model.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "runtime/state_storage.h"
#include "test_world.h"

namespace zs {
namespace {

using optim::StateDType;
using testing::MlpModel;
using testing::MlpShape;
using testing::world;

constexpr int64_t kBlock = 64;
constexpr int64_t kMinNumel = 100;  // the MLP's weights (260, 400 elements) narrow; the rest fp32

EngineConfig make_config(int stage, StateDType states, bool offload = false) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = DType::kBF16;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 12;
  c.optimizer.state_dtype = states;
  c.optimizer.state_block = kBlock;
  c.optimizer.state_min_numel = kMinNumel;
  c.offload.optimizer = offload;
  return c;
}

struct StateRun {
  uint64_t hash = 0;
  std::vector<double> losses;
};

// Steps [first, last) of the MLP's data on `engine`.
void steps(Engine& engine, MlpModel& model, int first, int last, StateRun& r) {
  for (int s = first; s < last; ++s) {
    model.set_step(s);
    r.losses.push_back(engine.step().loss);
  }
}

StateRun train(const EngineConfig& c, int n) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), c.micro_batches);
  MemoryTracker t;
  Engine engine(model, world(), c, &t);
  StateRun r;
  steps(engine, model, 0, n, r);
  r.hash = engine.param_hash();
  return r;
}

const char* name(StateDType d) { return optim::state_dtype_name(d); }

class NarrowStates : public ::testing::TestWithParam<StateDType> {};

TEST_P(NarrowStates, StagesAndOffloadAgreeAndDifferFromFp32) {
  const StateDType d = GetParam();
  const StateRun s0 = train(make_config(0, d), 12);
  for (int stage = 1; stage <= 3; ++stage) {
    EXPECT_EQ(train(make_config(stage, d), 12).hash, s0.hash) << "stage " << stage;
    EXPECT_EQ(train(make_config(stage, d, true), 12).hash, s0.hash) << "offload, stage " << stage;
  }
  const StateRun f32 = train(make_config(0, StateDType::kF32), 12);
  EXPECT_NE(f32.hash, s0.hash) << name(d) << " states train exactly like fp32 states";
  // Trains like fp32 states: the MLP's last loss within 1% of theirs.
  EXPECT_LT(std::fabs(s0.losses.back() - f32.losses.back()), 0.01 * f32.losses.back());
  if (world().rank() == 0) {
    std::printf("[%s] loss %.6f -> %.6f (fp32 states: -> %.6f)\n", name(d), s0.losses.front(),
                s0.losses.back(), f32.losses.back());
  }
}

// The bytes of one moment of a piece of n elements of a parameter that keeps fp32 states (`f32`)
// or not, computed here from the Note's rule.
int64_t moment_bytes(StateDType d, bool f32, int64_t n) {
  if (f32 || d == StateDType::kF32) return 4 * n;
  if (d == StateDType::kBF16) return 2 * n;
  return n + 4 * ((n + kBlock - 1) / kBlock);
}

// The optimizer bytes the engine should hold (the formula over its layouts, the largest over the
// ranks), each parameter's choice checked against `f32_named` (names "unit.param" that keep fp32
// states besides the small ones); `narrow_params` counts the narrow parameters (over the ranks).
int64_t expected_optimizer_bytes(const Engine& engine, MlpModel& model, const EngineConfig& c,
                                 const std::vector<std::string>& f32_named,
                                 int64_t& narrow_params) {
  const StateDType d = c.optimizer.state_dtype;
  int64_t expected = 0;
  for (size_t u = 0; u < engine.num_units(); ++u) {
    const GroupLayout& l = engine.layout(u);
    EXPECT_EQ(l.align, d == StateDType::kI8 ? 64 : 32) << "lcm(align 32, block 64) for int8";
    // Every rank allocates the largest of the shard group's ranks.
    const bool whole = c.stage == ZeroStage::k0 || world().size() == 1;
    int64_t most = 0;
    for (int r = 0; r < (whole ? 1 : world().size()); ++r) {
      const std::vector<ShardSegment> segs =
          whole ? master_segments(l, true, 0) : l.shard_segments(r);
      int64_t bytes = 0;
      for (const ShardSegment& s : segs) {
        const int64_t numel = l.params[static_cast<size_t>(s.param)].numel;
        const ParamSpec& spec = engine.param_specs(u)[static_cast<size_t>(s.param)];
        const std::string unit = model.unit(u).name();
        const bool f32 = numel < kMinNumel ||
                         std::count(f32_named.begin(), f32_named.end(), unit + "." + spec.name) > 0;
        bytes += 2 * moment_bytes(d, f32, s.length);
        EXPECT_EQ(state_dtype_of(c.optimizer, unit, spec), f32 ? StateDType::kF32 : d)
            << unit << "." << spec.name;
        narrow_params += !f32 && s.param_offset == 0 ? 1 : 0;  // each parameter once
      }
      most = std::max(most, bytes);
    }
    expected += most;
  }
  return expected;
}

// The engine's tracked and planned optimizer bytes, and the memory planner's for the same model,
// equal the formula's (expected_optimizer_bytes); returns the narrow parameters.
int64_t check_optimizer_bytes(const EngineConfig& c, const std::vector<std::string>& f32_named) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine engine(model, world(), c, &t);
  int64_t narrow_params = 0;
  const int64_t expected = expected_optimizer_bytes(engine, model, c, f32_named, narrow_params);
  EXPECT_EQ(t.current(MemCategory::kOptimizer), expected);
  EXPECT_EQ(engine.planned_bytes(MemCategory::kOptimizer), expected);
  // The memory planner names the model's parameters as the engine does.
  PlanConfig pc;
  pc.engine = c;
  pc.world = world().size();
  pc.rank = world().rank();
  EXPECT_EQ(plan_memory(ModelDesc::from_model(model), pc).bytes(MemCategory::kOptimizer), expected);
  return narrow_params;
}

TEST_P(NarrowStates, SmallParametersKeepFp32StatesAndBytesAreExact) {
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(stage);
    EXPECT_GT(check_optimizer_bytes(make_config(stage, GetParam()), {}), 0);
  }
}

// OptimizerConfig::state_fp32: the MLP's weights hidden.1 and hidden.3 (400 elements each, narrow
// by size) keep fp32 states by name, through an exact name and a glob whose '*' spans a dot.
const std::vector<std::string> kPatterns = {"hidden.1.weight", "*.3.w*"};
const std::vector<std::string> kNamed = {"hidden.1.weight", "hidden.3.weight"};

EngineConfig named_config(int stage, StateDType d, bool offload = false) {
  EngineConfig c = make_config(stage, d, offload);
  c.optimizer.state_fp32 = kPatterns;
  return c;
}

TEST_P(NarrowStates, NamedParametersKeepFp32StatesAtEveryStage) {
  const StateDType d = GetParam();
  const StateRun s0 = train(named_config(0, d), 8);
  for (int stage = 1; stage <= 3; ++stage)
    EXPECT_EQ(train(named_config(stage, d), 8).hash, s0.hash) << "stage " << stage;
  EXPECT_EQ(train(named_config(3, d, true), 8).hash, s0.hash) << "offload, stage 3";
  EXPECT_NE(train(make_config(0, d), 8).hash, s0.hash) << "the names changed nothing";
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(stage);
    // hidden.0.weight and hidden.2.weight stay narrow.
    EXPECT_EQ(check_optimizer_bytes(named_config(stage, d), kNamed), 2);
  }
}

// The message of what `f` throws ("" when nothing).
template <typename F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StateStorage, UnmatchedNamePatternRefusedOnEveryRank) {
  // A pattern that matches nothing, and one that matches only a frozen parameter.
  MlpShape frozen_bias;
  frozen_bias.frozen_mask = 2;  // hidden.0.bias
  for (const auto& [pattern, shape] : std::vector<std::pair<std::string, MlpShape>>{
           {"hidden.9.*", MlpShape{}}, {"hidden.0.bias", frozen_bias}}) {
    EngineConfig c = make_config(3, StateDType::kI8);
    c.optimizer.state_fp32 = {"hidden.1.weight", pattern};
    MlpModel model(shape, world().size(), world().rank(), 1);
    MemoryTracker t;
    const std::string m = thrown([&] { Engine engine(model, world(), c, &t); });
    EXPECT_NE(m.find("optimizer.state_fp32 pattern '" + pattern +
                     "' matches no trainable parameter (names are unit.param, e.g. "
                     "hidden.0.weight)"),
              std::string::npos)
        << m;
    PlanConfig pc;
    pc.engine = c;
    EXPECT_NE(thrown([&] {
                plan_memory(ModelDesc::from_model(model), pc);
              }).find("pattern '" + pattern + "' matches no trainable parameter"),
              std::string::npos);
  }
}

TEST(StateStorage, StateStorageNameRecordsTheNames) {
  OptimizerConfig oc;
  oc.state_dtype = StateDType::kI8;
  oc.state_block = 64;
  oc.state_min_numel = 100;
  oc.state_fp32 = {"head.*", "embed.wte", "head.*"};
  EXPECT_EQ(state_storage_name(oc),
            "int8 (block 64, float8 codes, fp32 under 100 elements and for [embed.wte, head.*])");
  oc.state_dtype = StateDType::kBF16;
  oc.state_fp32 = {};
  EXPECT_EQ(state_storage_name(oc), "bf16 (fp32 under 100 elements)");
}

// A copy of the decoded state (what a checkpoint saves) written into a fresh engine through
// shard_state() resumes bit for bit.
TEST_P(NarrowStates, DecodedStateResumesBitwise) {
  const StateDType d = GetParam();
  for (int stage : {0, 3}) {
    SCOPED_TRACE(stage);
    const EngineConfig c = make_config(stage, d, stage == 3);
    const StateRun whole = train(c, 10);
    MlpModel ma(MlpShape{}, world().size(), world().rank(), 1);
    MlpModel mb(MlpShape{}, world().size(), world().rank(), 1);
    MemoryTracker ta, tb;
    Engine a(ma, world(), c, &ta);
    Engine b(mb, world(), c, &tb);
    StateRun ra, rb;
    steps(a, ma, 0, 5, ra);
    for (size_t u = 0; u < a.num_units(); ++u) {
      const UnitShardState sa = a.shard_state(u);
      const UnitShardState sb = b.shard_state(u);
      ASSERT_EQ(sa.numel, sb.numel);
      const size_t bytes = static_cast<size_t>(sa.numel) * sizeof(float);
      std::memcpy(sb.master, sa.master, bytes);
      std::memcpy(sb.exp_avg, sa.exp_avg, bytes);
      std::memcpy(sb.exp_avg_sq, sa.exp_avg_sq, bytes);
    }
    b.set_steps_taken(a.steps_taken());
    b.refresh_params_from_master();
    steps(b, mb, 5, 10, rb);
    EXPECT_EQ(b.param_hash(), whole.hash);
  }
}

// The same copy piece by piece (Engine::shard_pieces with at most 100 elements, raised to the
// block of 64): the pieces tile each rank's part, each boundary is a cut, each piece's decoded
// moments equal the whole view's, and the copy resumes bit for bit.
TEST_P(NarrowStates, DecodedStateInPiecesResumesBitwise) {
  const StateDType d = GetParam();
  for (int stage : {0, 3}) {
    SCOPED_TRACE(stage);
    const EngineConfig c = make_config(stage, d);
    const StateRun whole = train(c, 10);
    MlpModel ma(MlpShape{}, world().size(), world().rank(), 1);
    MlpModel mb(MlpShape{}, world().size(), world().rank(), 1);
    MemoryTracker ta, tb;
    Engine a(ma, world(), c, &ta);
    Engine b(mb, world(), c, &tb);
    StateRun ra, rb;
    steps(a, ma, 0, 5, ra);
    size_t pieced = 0;
    for (size_t u = 0; u < a.num_units(); ++u) {
      const ShardExtent ext = a.shard_extent(u);
      const UnitShardState full = a.shard_state(u);
      const std::vector<float> m(full.exp_avg, full.exp_avg + full.numel);
      const std::vector<float> v(full.exp_avg_sq, full.exp_avg_sq + full.numel);
      a.release_shard_state(u, false);
      const std::vector<ShardExtent> pieces = a.shard_pieces(u, 100);
      pieced += pieces.size() > 1 ? 1 : 0;
      int64_t at = ext.begin;
      for (const ShardExtent& piece : pieces) {
        EXPECT_EQ(piece.begin, at);
        EXPECT_GT(piece.numel, 0);
        EXPECT_LE(piece.numel, 100);
        at += piece.numel;
        const UnitShardState sa = a.shard_state(u, piece);
        const UnitShardState sb = b.shard_state(u, piece);
        ASSERT_EQ(sa.numel, piece.numel);
        ASSERT_EQ(sa.begin, piece.begin);
        const size_t off = static_cast<size_t>(piece.begin - ext.begin);
        const size_t bytes = static_cast<size_t>(sa.numel) * sizeof(float);
        EXPECT_EQ(std::memcmp(sa.exp_avg, m.data() + off, bytes), 0);
        EXPECT_EQ(std::memcmp(sa.exp_avg_sq, v.data() + off, bytes), 0);
        std::memcpy(sb.master, sa.master, bytes);
        std::memcpy(sb.exp_avg, sa.exp_avg, bytes);
        std::memcpy(sb.exp_avg_sq, sa.exp_avg_sq, bytes);
        b.release_shard_state(u, true);
        a.release_shard_state(u, false);
      }
      EXPECT_EQ(at, ext.begin + ext.numel);
    }
    EXPECT_GT(pieced, 0u);  // some unit was cut
    b.set_steps_taken(a.steps_taken());
    b.refresh_params_from_master();
    steps(b, mb, 5, 10, rb);
    EXPECT_EQ(b.param_hash(), whole.hash);
  }
}

// Narrow states compose with gradient accumulation and clipping (2 micro-batches: stages 0 and 1
// sum them locally, stages 2 and 3 reduce each one, so the pairs agree bit for bit, as with fp32
// states: docs/engine.md) and with hybrid sharding (groups of 2 at 4 ranks, one micro-batch:
// stages 0-3 agree bit for bit); and the non-finite policy: a step whose gradient is NaN is
// skipped before it reaches the codes (parameters and decoded moments unchanged), and training
// goes on.
TEST_P(NarrowStates, ComposeWithAccumulationClippingHybridAndSkips) {
  const StateDType d = GetParam();
  auto config = [&](int stage, int micro_batches, int shard_group) {
    EngineConfig c = make_config(stage, d);
    c.micro_batches = micro_batches;
    c.clip_norm = 0.05f;  // below the MLP's gradient norms: every step clips
    c.shard_group_size = shard_group;
    return c;
  };
  EXPECT_EQ(train(config(1, 2, 0), 8).hash, train(config(0, 2, 0), 8).hash) << "accumulation";
  EXPECT_EQ(train(config(3, 2, 0), 8).hash, train(config(2, 2, 0), 8).hash) << "accumulation";
  if (world().size() == 4) {
    const uint64_t h0 = train(config(0, 1, 2), 8).hash;
    for (int stage = 1; stage <= 3; ++stage) {
      EXPECT_EQ(train(config(stage, 1, 2), 8).hash, h0) << "hybrid, stage " << stage;
    }
  }
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  EngineConfig skipping = make_config(3, d);
  skipping.max_consecutive_skips = 1;
  Engine e(model, world(), skipping, &t);
  model.set_step(0);
  ASSERT_FALSE(e.step().skipped);
  auto moments = [&] {
    std::vector<float> out;
    for (size_t u = 0; u < e.num_units(); ++u) {
      const UnitShardState st = e.shard_state(u);
      out.insert(out.end(), st.exp_avg, st.exp_avg + st.numel);
      out.insert(out.end(), st.exp_avg_sq, st.exp_avg_sq + st.numel);
    }
    return out;
  };
  const uint64_t before = e.param_hash();
  const std::vector<float> m_before = moments();
  model.set_step(1);
  model.poison_next_backward(world().rank() == 0);
  EXPECT_TRUE(e.step().skipped);
  model.poison_next_backward(false);
  EXPECT_EQ(e.param_hash(), before);
  const std::vector<float> m_after = moments();
  ASSERT_EQ(m_before.size(), m_after.size());
  EXPECT_EQ(std::memcmp(m_before.data(), m_after.data(), 4 * m_after.size()), 0)
      << "a skipped step changed the moments";
  model.set_step(2);
  EXPECT_FALSE(e.step().skipped);
  EXPECT_NE(e.param_hash(), before);
}

INSTANTIATE_TEST_SUITE_P(States, NarrowStates,
                         ::testing::Values(StateDType::kBF16, StateDType::kI8),
                         [](const auto& info) { return std::string(name(info.param)); });

// [Note: decoded state round trip] on adversarial blocks: a scale whose products are subnormal
// (codes whose decodings collide), zeros, a NaN scale, a short last block. The scales are ones the
// book's encoder produces (float8 stores a block of subnormal absmax as zeros, so its smallest
// scales are normal).
void expect_round_trip(StateCode code, const float (&scales)[4]) {
  SCOPED_TRACE(state_code_name(code));
  const int m_top = code == StateCode::kFloat8 ? 120 : 127;
  const int v_top = code == StateCode::kFloat8 ? 248 : 255;
  GroupLayout l = compute_group_layout(std::vector<int64_t>{200}, 1, 64);
  OptimizerConfig oc;
  oc.state_dtype = StateDType::kI8;
  oc.state_block = 64;
  oc.state_min_numel = 0;
  oc.state_code = code;
  const std::vector<ShardSegment> segs = master_segments(l, true, 0);
  const StateStorage st = plan_state_storage(l, segs, oc);
  ASSERT_EQ(st.blocks, 4);
  ASSERT_EQ(st.moment_bytes(), 200 + 16);
  std::vector<char> mb(static_cast<size_t>(st.moment_bytes())), vb(mb.size());
  NarrowMoments nm{&st, &segs, carve_moment(st, mb.data()), carve_moment(st, vb.data())};
  for (int i = 0; i < 200; ++i) {
    const float x = std::sin(0.37f * static_cast<float>(i)) * std::pow(10.0f, -(i % 9));
    static_cast<uint8_t*>(nm.m.narrow)[i] = encode_state_value(state_code_book(code, true), x);
    static_cast<uint8_t*>(nm.v.narrow)[i] =
        encode_state_value(state_code_book(code, false), std::fabs(x));
  }
  for (int b = 0; b < 4; ++b) {
    nm.m.scales[b] = nm.v.scales[b] = scales[b];
    if (b == 1) {  // an all-zero block has zero codes
      std::memset(static_cast<uint8_t*>(nm.m.narrow) + 64, 0, 64);
      std::memset(static_cast<uint8_t*>(nm.v.narrow) + 64, 0, 64);
    }
  }
  // Make each block's absmax element code magnitude 1 (as the encoder always does).
  for (int b = 0; b < 4; ++b) {
    if (b == 1) continue;
    static_cast<uint8_t*>(nm.m.narrow)[64 * b] = static_cast<uint8_t>(m_top);
    static_cast<uint8_t*>(nm.v.narrow)[64 * b] = static_cast<uint8_t>(v_top);
  }
  std::vector<float> m(200), v(200), m2(200), v2(200);
  decode_moments(nm, 0, 200, m.data(), v.data());
  const std::vector<char> codes_before = mb, v_codes_before = vb;
  std::memset(mb.data(), 0, mb.size());  // forget the codes: what a fresh engine has
  std::memset(vb.data(), 0, vb.size());
  encode_moments(nm, 0, 200, m.data(), v.data());
  decode_moments(nm, 0, 200, m2.data(), v2.data());
  EXPECT_EQ(std::memcmp(m.data(), m2.data(), 800), 0);
  EXPECT_EQ(std::memcmp(v.data(), v2.data(), 800), 0);
  // Subnormal products in block 0: other codes than before decode to the same values.
  int changed = 0;
  for (size_t i = 0; i < 64; ++i) {
    changed += mb[16 + i] != codes_before[16 + i] ? 1 : 0;
    changed += vb[16 + i] != v_codes_before[16 + i] ? 1 : 0;
  }
  EXPECT_GT(changed, 0);
  // Re-encoding values that already match leaves the codes alone.
  const std::vector<char> codes_after = mb;
  encode_moments(nm, 0, 200, m.data(), v.data());
  EXPECT_EQ(mb, codes_after);
  // In pieces whose ends are cuts: the same decoded values, and encoding the pieces one at a time
  // into forgotten codes gives the codes of the whole.
  EXPECT_EQ(moment_cut(nm, 0), 0);
  EXPECT_EQ(moment_cut(nm, 64), 64);
  EXPECT_EQ(moment_cut(nm, 100), 64);
  EXPECT_EQ(moment_cut(nm, 199), 192);
  EXPECT_EQ(moment_cut(nm, 200), 200);
  const int64_t cuts[] = {0, 64, 192, 200};
  std::memset(mb.data(), 0, mb.size());
  std::memset(vb.data(), 0, vb.size());
  for (int k = 0; k < 3; ++k) {
    const int64_t lo = cuts[k], n = cuts[k + 1] - cuts[k];
    encode_moments(nm, lo, n, m.data() + lo, v.data() + lo);
  }
  EXPECT_EQ(mb, codes_after);
  for (int k = 0; k < 3; ++k) {
    const int64_t lo = cuts[k], n = cuts[k + 1] - cuts[k];
    std::vector<float> pm(static_cast<size_t>(n)), pv(static_cast<size_t>(n));
    decode_moments(nm, lo, n, pm.data(), pv.data());
    EXPECT_EQ(std::memcmp(pm.data(), m.data() + lo, static_cast<size_t>(n) * 4), 0) << lo;
    EXPECT_EQ(std::memcmp(pv.data(), v.data() + lo, static_cast<size_t>(n) * 4), 0) << lo;
  }
  // A range that cuts a block is refused, naming it.
  std::vector<float> pm(100), pv(100);
  try {
    decode_moments(nm, 10, 100, pm.data(), pv.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moments [10, 110): cuts an int8 block of segment 0"),
              std::string::npos)
        << e.what();
  }
}

TEST(StateStorage, Int8DecodeEncodeKeepsDecodedValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_round_trip(StateCode::kDynamic, {1e-44f, 0.0f, nan, 3e-39f});
  expect_round_trip(StateCode::kFloat8, {1.5e-38f, 0.0f, nan, 2e-30f});
}

TEST(StateStorage, BadSettingsRefusedByName) {
  auto message = [](const EngineConfig& c) -> std::string {
    try {
      c.validate();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EngineConfig c = make_config(3, StateDType::kI8);
  for (int64_t b : {0, 32, 100, 96}) {
    c.optimizer.state_block = b;
    EXPECT_NE(message(c).find("optimizer.state_block " + std::to_string(b)), std::string::npos)
        << message(c);
  }
  c = make_config(3, StateDType::kI8);
  c.optimizer.state_min_numel = -1;
  EXPECT_NE(message(c).find("optimizer.state_min_numel -1"), std::string::npos) << message(c);
  c = make_config(3, StateDType::kI8);
  c.optimizer.kind = OptimizerKind::kSgd;
  EXPECT_NE(message(c).find("optimizer.state_dtype int8"), std::string::npos) << message(c);
  c.optimizer.state_dtype = static_cast<StateDType>(7);
  c.optimizer.kind = OptimizerKind::kAdamW;
  EXPECT_NE(message(c).find("optimizer.state_dtype 7"), std::string::npos) << message(c);
  EXPECT_EQ(message(make_config(3, StateDType::kBF16)), "");
  c = make_config(3, StateDType::kF32);
  c.optimizer.state_fp32 = {"hidden.1.weight"};
  EXPECT_NE(message(c).find("optimizer.state_fp32 [hidden.1.weight] has no effect with "
                            "state_dtype fp32"),
            std::string::npos)
      << message(c);
  for (const std::string& p : std::vector<std::string>{"", "a,b", std::string(129, 'x')}) {
    c = make_config(3, StateDType::kI8);
    c.optimizer.state_fp32 = {p};
    EXPECT_NE(message(c).find("optimizer.state_fp32 pattern '" + p +
                              "' must have 1..128 characters and no comma"),
              std::string::npos)
        << message(c);
  }
  c.optimizer.state_fp32.assign(65, "hidden.*");
  EXPECT_NE(message(c).find("optimizer.state_fp32 has 65 patterns, more than 64"),
            std::string::npos)
      << message(c);
}

}  // namespace
}  // namespace zs
