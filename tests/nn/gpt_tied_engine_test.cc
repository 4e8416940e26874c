// Tied input/output embeddings under the engine ([Note: tied parameters] in unit/unit.h): the
// head's lm_head.weight is the embed unit's wte, one parameter. At 1, 2 and 4 ranks:
//   - it is one parameter: the engine lays out V*C elements fewer than the untied model, and the
//     head's trainable parameters no longer include lm_head.weight;
//   - its gradient is the sum of both uses: one SGD step (lr 1, no momentum) of the tied model
//     moves wte by what the untied model, started with lm_head = wte, moves wte and lm_head
//     together (within fp32 rounding of the sum's order), and every block by the same bits;
//   - with 2 micro-batches, stage 3 without and with prefetch 2, and with an offloaded optimizer,
//     gives stage 2's bits (gpt_llama_engine_test: stages 0-3 at one micro-batch, LoRA and the
//     int8 base with "llama_tied");
//   - an evaluation forward at stage 3 (the owner held to the end of the forward) gives the loss
//     of the step's forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/gpt/gpt.h"
#include "runtime/engine.h"
#include "tests/nn/gpt_arch_cases.h"
#include "tests/nn/gpt_engine_test_helpers.h"

namespace zs::nn {
namespace {

using testing::engine_config;
using testing::rank_tokens;
using zs::testing::world;

// "llama_tied" and "gpt2_tied" on tiny_config()'s sizes.
std::vector<testing::ArchCase> tied_archs() {
  GptArchitecture base;
  base.width = 32;
  base.heads = 4;
  std::vector<testing::ArchCase> v;
  for (const testing::ArchCase& a : testing::llama_form_cases(base))
    if (a.arch.tied_embeddings) v.push_back(a);
  return v;
}

EngineConfig sgd_config(int stage) {
  EngineConfig e = engine_config(stage, DType::kF32);
  e.optimizer.kind = OptimizerKind::kSgd;
  e.optimizer.sgd.momentum = 0.0f;
  e.optimizer.schedule.lr = 1.0f;
  e.clip_norm = 0.0f;  // the norms differ (one tied gradient or two): no clipping
  return e;
}

// Writes `values` (a whole parameter) into parameter p of unit u's fp32 master, this rank's part.
void set_master_param(Engine& e, size_t u, size_t p, const std::vector<float>& values) {
  const UnitShardState st = e.shard_state(u);
  const ParamSlot& slot = e.layout(u).params.at(p);
  for (int64_t i = 0; i < st.numel; ++i) {
    const int64_t at = st.begin + i - slot.offset;
    if (at >= 0 && at < slot.numel) st.master[i] = values[static_cast<size_t>(at)];
  }
  e.refresh_params_from_master();
}

size_t param_index(Engine& e, size_t u, const std::string& name) {
  const std::vector<ParamSpec>& s = e.param_specs(u);
  const auto it =
      std::find_if(s.begin(), s.end(), [&](const ParamSpec& p) { return p.name == name; });
  EXPECT_NE(it, s.end()) << name;
  return static_cast<size_t>(it - s.begin());
}

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

TEST(GptTiedEngine, OneParameterWhoseGradientSumsBothUses) {
  for (const testing::ArchCase& a : tied_archs()) {
    SCOPED_TRACE(a.name);
    GptConfig tied = testing::tiny_config(a, DType::kF32);
    GptConfig untied = tied;
    untied.arch.tied_embeddings = false;
    const int64_t VC = int64_t{tied.arch.vocab} * tied.arch.width;
    const size_t head = static_cast<size_t>(tied.arch.layers) + 1;
    GptModel mt(tied), mu(untied);
    Engine et(mt, world(), sgd_config(3)), eu(mu, world(), sgd_config(3));
    EXPECT_EQ(et.num_params(), eu.num_params() - VC);
    EXPECT_EQ(et.num_params(), tied.num_params());
    for (const ParamSpec& p : et.param_specs(head)) EXPECT_NE(p.name, "lm_head.weight");
    // The untied model starts where the tied one does: lm_head = wte.
    const std::vector<float> wte0 = et.gather_master_param(0, 0);
    ASSERT_EQ(eu.gather_master_param(0, 0), wte0);  // the same draw for wte
    set_master_param(eu, head, param_index(eu, head, "lm_head.weight"), wte0);
    const auto tokens = rank_tokens(tied, 1, 11);
    mt.set_tokens(tokens);
    mu.set_tokens(tokens);
    const double lt = et.step().loss, lu = eu.step().loss;
    EXPECT_EQ(lt, lu);  // the same forward
    const std::vector<float> dt = minus(wte0, et.gather_master_param(0, 0));
    const std::vector<float> de = minus(wte0, eu.gather_master_param(0, 0));
    const std::vector<float> dh =
        minus(wte0, eu.gather_master_param(head, param_index(eu, head, "lm_head.weight")));
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < dt.size(); ++i) {
      worst = std::max(worst, std::abs(double{dt[i]} - (double{de[i]} + double{dh[i]})));
      scale = std::max(scale, std::abs(double{de[i]} + double{dh[i]}));
    }
    EXPECT_GT(scale, 1e-4);  // both uses carry a gradient
    EXPECT_LE(worst, 1e-5 * scale) << "worst " << worst << " of " << scale;
    // Without the embeddings' difference, every block took the same step to the bit.
    for (size_t u = 1; u < head; ++u)
      EXPECT_EQ(et.gather_master_group(u), eu.gather_master_group(u)) << "unit " << u;
  }
}

uint64_t train_hash(const GptConfig& c, const EngineConfig& ec, int steps, double* last_loss) {
  GptModel m(c);
  Engine e(m, world(), ec);
  const std::vector<int32_t> tokens = rank_tokens(c, ec.micro_batches, 5);  // a view is kept
  m.set_tokens(tokens);
  for (int s = 0; s < steps; ++s) *last_loss = e.step().loss;
  return e.param_hash();
}

// Two micro-batches: stages 2-3 reduce each one (another summation order than stages 0-1), so
// stage 2 is the reference; stage 3 without prefetch, with prefetch 2 (the owner's held slot
// beside two in flight) and with an offloaded optimizer give its bits.
TEST(GptTiedEngine, PrefetchMicroBatchesAndOffloadKeepTheBits) {
  for (const testing::ArchCase& a : tied_archs())
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(a.name + " " + std::string(dtype_name(dt)));
      const GptConfig c = testing::tiny_config(a, dt);
      double l2 = 0.0, l = 0.0;
      const uint64_t h2 = train_hash(c, engine_config(2, dt, 2), 3, &l2);
      for (int prefetch : {0, 2}) {
        EngineConfig pf = engine_config(3, dt, 2);
        pf.prefetch = prefetch;
        EXPECT_EQ(train_hash(c, pf, 3, &l), h2) << "stage 3, prefetch " << prefetch;
        EXPECT_EQ(l, l2);
      }
      EngineConfig off = engine_config(3, dt, 2);
      off.offload.optimizer = true;
      EXPECT_EQ(train_hash(c, off, 3, &l), h2) << "stage 3, offload";
      EXPECT_EQ(l, l2);
    }
}

TEST(GptTiedEngine, EvaluationForwardAtStage3) {
  for (const testing::ArchCase& a : tied_archs()) {
    SCOPED_TRACE(a.name);
    const GptConfig c = testing::tiny_config(a, DType::kBF16);
    GptModel m(c);
    EngineConfig ec = engine_config(3, DType::kBF16);
    ec.prefetch = 2;
    Engine e(m, world(), ec);
    const std::vector<int32_t> tokens = rank_tokens(c, 1, 3);
    m.set_tokens(tokens);
    m.load_micro_batch(0);
    e.forward();
    const double eval = m.loss();
    e.step();
    EXPECT_EQ(m.loss(), eval);  // this rank's forward of the same tokens, before the update
    m.load_micro_batch(0);
    e.forward();  // and again after a step: the held slot was given back
    EXPECT_TRUE(std::isfinite(m.loss()));
  }
}

}  // namespace
}  // namespace zs::nn
