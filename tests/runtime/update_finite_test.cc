// [Note: non-finite policy] An update that makes a parameter non-finite stops the run on every
// rank, naming the step, the unit and the parameter, on every optimizer path: AdamW with the
// parameters as master (fp32) or a bf16 copy, offloaded, bf16 and int8 states, SGD. The bad state
// is planted on the last rank only (at stage 0 every rank updates the whole group, so only that
// rank's update goes bad; offload needs stage 1): the ranks must agree. Run at 1, 2 and 4 ranks.
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "mlp_model.h"
#include "optim/cpu_adam.h"
#include "optim/cpu_adam_internal.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;
using testing::world;

struct Path {
  const char* name;
  DType compute;
  OptimizerKind kind;
  optim::StateDType states;
  bool offload;
};

EngineConfig make_config(const Path& p, int stage) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = p.compute;
  c.precision.grad_dtype = DType::kF32;
  c.optimizer.kind = p.kind;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 1;
  c.optimizer.schedule.total_steps = 10;
  c.optimizer.state_dtype = p.states;
  c.optimizer.state_block = 64;
  c.optimizer.state_min_numel = 100;  // the MLP's weights (260, 400 elements) narrow
  c.offload.optimizer = p.offload;
  return c;
}

// The first parameter of unit u that has elements in the last rank's state, by name.
std::string first_param_of_last_rank(Engine& e, size_t u) {
  const GroupLayout& l = e.layout(u);
  const UnitShardState st = e.shard_state(u);
  const bool whole = st.numel == l.padded_numel;  // stage 0: every rank holds the group
  const int64_t begin = whole ? 0 : (world().size() - 1) * l.shard_numel;
  const int64_t end = whole ? l.padded_numel : begin + l.shard_numel;
  for (size_t p = 0; p < l.params.size(); ++p) {
    if (l.params[p].offset + l.params[p].numel > begin && l.params[p].offset < end)
      return e.param_specs(u)[p].name;
  }
  return "";
}

TEST(UpdateFinite, AbsurdStateStopsEveryRankNamingTheParameter) {
  const Path paths[] = {
      {"adamw fp32 (parameters are the master)", DType::kF32, OptimizerKind::kAdamW,
       optim::StateDType::kF32, false},
      {"adamw bf16 compute", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kF32, false},
      {"adamw offloaded", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kF32, true},
      {"adamw bf16 states", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kBF16, false},
      {"adamw int8 states", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kI8, false},
      {"adamw int8 states offloaded", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kI8,
       true},
      {"sgd", DType::kBF16, OptimizerKind::kSgd, optim::StateDType::kF32, false},
  };
  const bool last = world().rank() == world().size() - 1;
  for (const Path& path : paths) {
    for (int stage : {path.offload ? 1 : 0, 3}) {  // offload needs sharded states
      SCOPED_TRACE(std::string(path.name) + ", stage " + std::to_string(stage));
      EngineConfig c = make_config(path, stage);
      // SGD's step is lr * momentum: only a learning rate above 1 takes 3e38 past the fp32 range.
      if (path.kind == OptimizerKind::kSgd) c.optimizer.schedule.lr = 10.0f;
      MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
      MemoryTracker t;
      Engine e(model, world(), c, &t);
      model.set_step(0);
      e.step();
      // The moment (Adam m, SGD momentum) of the last unit whose parameters the last rank holds
      // (at 4 ranks it holds only padding of the small head) becomes 3e38 on the last rank:
      // finite, so a checkpoint load takes it, and the next update overflows.
      size_t u = e.num_units() - 1;
      while (u > 0 && first_param_of_last_rank(e, u).empty()) --u;
      const std::string name = first_param_of_last_rank(e, u);
      ASSERT_FALSE(name.empty());
      const UnitShardState st = e.shard_state(u);
      if (last) {
        for (int64_t i = 0; i < st.numel; ++i) st.exp_avg[i] = 3e38f;
      }
      e.refresh_params_from_master();
      model.set_step(1);
      try {
        e.step();
        ADD_FAILURE() << "an update to inf did not stop the run";
      } catch (const Error& x) {
        EXPECT_EQ(x.code(), ErrorCode::kNonFinite);
        const std::string want = "step 2: the update made parameter '" + name + "' of unit '" +
                                 e.unit_name(u) + "' not finite";
        EXPECT_NE(std::string(x.what()).find(want), std::string::npos)
            << x.what() << "\nwanted: " << want;
      }
    }
  }
}

// The host AdamW's own check ([Note: overflow limit] in optim/cpu_adam.cc) on every path: an
// update that leaves p unchanged (lr 0, zero gradient) over values at the limits, in the vector
// body and the scalar tail: 65504 fits fp16 and 65520 rounds to its inf; 0x7f7f7fff fits bf16 and
// 0x7f7f8000 rounds to its inf; FLT_MAX fits fp32; inf and NaN fit nothing.
TEST(UpdateFinite, HostAdamReportsWhatDoesNotFit) {
  using optim::detail::AdamIsa;
  const optim::AdamWStep s = optim::make_adamw_step(optim::AdamWConfig{}, 0.0f, 1, 1.0f, true);
  const float inf = std::numeric_limits<float>::infinity();
  const struct {
    float value;
    bool f32, bf16, f16;  // fits
  } cases[] = {{65504.0f, true, true, true},
               {65520.0f, true, true, false},
               {std::bit_cast<float>(0x7f7f7fffu), true, true, false},
               {std::bit_cast<float>(0x7f7f8000u), true, false, false},
               {-std::numeric_limits<float>::max(), true, false, false},
               {-inf, false, false, false},
               {std::numeric_limits<float>::quiet_NaN(), false, false, false}};
  for (AdamIsa isa : {AdamIsa::kScalar, AdamIsa::kAvx2, AdamIsa::kAvx512}) {
    if (!optim::detail::adam_isa_supported(isa)) continue;
    for (const auto& c : cases) {
      for (int at : {0, 20, 36}) {  // 37 elements: two AVX2 vectors and a tail, or one AVX-512
        SCOPED_TRACE(::testing::Message()
                     << optim::detail::adam_isa_name(isa) << " " << c.value << " at " << at);
        for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
          std::vector<float> p(37, 1.0f), g(37, 0.0f), m(37, 0.0f), v(37, 0.0f);
          std::vector<uint32_t> o(37);
          p[static_cast<size_t>(at)] = c.value;
          const bool fits = out == DType::kF32 ? c.f32 : out == DType::kBF16 ? c.bf16 : c.f16;
          EXPECT_EQ(optim::detail::cpu_adamw_with(isa, 1, p.data(), g.data(), DType::kF32, m.data(),
                                                  v.data(), 37, s, o.data(), out),
                    fits)
              << dtype_name(out);
        }
      }
    }
  }
}

// An ordinary run passes the check at every step (the check itself changes nothing).
TEST(UpdateFinite, FiniteRunsPass) {
  const Path p{"adamw bf16", DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kI8, false};
  MlpModel model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  Engine e(model, world(), make_config(p, 2), &t);
  for (int s = 0; s < 4; ++s) {
    model.set_step(s);
    EXPECT_NO_THROW(e.step());
  }
}

}  // namespace
}  // namespace zs
