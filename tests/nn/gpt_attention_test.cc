// GptModel with the fused attention (GptRunSettings::attention, nn/flash_attention.h) against the
// same model on the GEMM attention: the loss and every gradient within fp32 rounding (bf16 within
// its rounding), checkpointing bitwise, on the GPT-2, Llama (grouped heads), Qwen2 and Qwen3 forms
// at a context of two query tiles, the second partial; the activation plan (which the model
// allocates from) drops the [B, H, T, T] buffers for the kernel's, by the bytes written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "nn/flash_attention.h"
#include "tests/nn/gpt_arch_cases.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

using testing::ArchCase;

struct ModelRun {
  MemoryTracker tracker;
  GptModel model;
  UnitHarness host;
  ModelRun(const GptConfig& c, uint64_t seed)
      : model(c, &tracker), host(model, c.run.compute_dtype, seed) {}
};

GptConfig config_of(const ArchCase& arch, DType dt, GptAttention attention, bool ckpt = false) {
  GptConfig c = testing::tiny_config(arch, dt);
  c.arch.context = 70;  // query tiles of 64 and 6 rows
  c.run.attention = attention;
  c.run.checkpoint_activations = ckpt;
  return c;
}

std::vector<int32_t> random_tokens(const GptConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(c.run.batch) * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// Parameters away from their init (every path carries signal), one forward and backward.
void step(ModelRun& r, const std::vector<int32_t>& tokens) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (size_t u = 0; u < r.host.num_units(); ++u)
    for (size_t i = 0; i < r.host.num_params(u); ++i)
      for (float& x : r.host.master(u, i)) x += nd(rng);
  r.host.refresh();
  r.model.set_tokens(tokens);
  r.model.load_micro_batch(0);
  r.host.forward();
  r.host.backward(1.0f);
}

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// fp32: loss within 1e-6 relative and each gradient within 1e-4 of its largest element (the
// attention's outputs agree within ~1e-6 relative, flash_attention_test); bf16 (q, k, v, O and,
// on the GEMM path, P rounded to bf16): 1e-2 and 5e-2.
TEST(GptAttention, FusedMatchesGemm) {
  for (const ArchCase& arch : testing::tiny_archs())
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(::testing::Message() << arch.name << " " << dtype_name(dt));
      const bool fp32 = dt == DType::kF32;
      const GptConfig cg = config_of(arch, dt, GptAttention::kGemm);
      const GptConfig cf = config_of(arch, dt, GptAttention::kFused);
      const auto tokens = random_tokens(cg, 13);
      ModelRun g(cg, 5), f(cf, 5);
      step(g, tokens);
      step(f, tokens);
      std::printf("  %-10s %-4s loss gemm %.8f fused %.8f\n", arch.name.c_str(),
                  std::string(dtype_name(dt)).c_str(), g.model.loss(), f.model.loss());
      EXPECT_NEAR(g.model.loss(), f.model.loss(), (fp32 ? 1e-6 : 1e-2) * g.model.loss());
      double worst = 0.0;
      for (size_t u = 0; u < g.host.num_units(); ++u)
        for (size_t i = 0; i < g.host.num_params(u); ++i) {
          const std::vector<float>& a = g.host.grad(u, i);
          const std::vector<float>& b = f.host.grad(u, i);
          ASSERT_EQ(a.size(), b.size());
          const double scale = max_abs(a) + 1e-30;
          for (size_t j = 0; j < a.size(); ++j)
            worst = std::max(worst, std::fabs(static_cast<double>(a[j]) - b[j]) / scale);
        }
      std::printf("  %-10s %-4s worst gradient difference %.3e of its largest element\n",
                  arch.name.c_str(), std::string(dtype_name(dt)).c_str(), worst);
      EXPECT_LE(worst, fp32 ? 1e-4 : 5e-2);
    }
}

// [Note: block activations]: the recomputed forward gives the same bits with the fused kernel.
TEST(GptAttention, FusedCheckpointedIsBitwise) {
  const ArchCase arch = testing::tiny_archs()[1];  // llama_kv2
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const GptConfig c = config_of(arch, dt, GptAttention::kFused);
    const GptConfig ck = config_of(arch, dt, GptAttention::kFused, true);
    const auto tokens = random_tokens(c, 17);
    ModelRun a(c, 3), b(ck, 3);
    step(a, tokens);
    step(b, tokens);
    EXPECT_EQ(a.model.loss(), b.model.loss());
    for (size_t u = 0; u < a.host.num_units(); ++u)
      for (size_t i = 0; i < a.host.num_params(u); ++i) {
        const std::vector<float>& x = a.host.grad(u, i);
        const std::vector<float>& y = b.host.grad(u, i);
        EXPECT_EQ(0, std::memcmp(x.data(), y.data(), 4 * x.size()))
            << "unit " << u << " " << a.host.spec(u, i).name;
      }
  }
}

// The plan drops, per block set, P [B, H, T, T] fp32 (and its mm copy with bf16) and K, V beyond
// their KV heads, and adds the log-sum-exp [B, H, T] and K, V transposed [B, KV, hd, Tp]; in the
// workspace, the scores, the head
// split's and merge's [M, D] temporaries, dS in mm, for one tile set per thread. The model
// allocates exactly the plan.
TEST(GptAttention, PlanCountsTheKernelsBuffers) {
  const ArchCase arch = testing::tiny_archs()[1];  // llama_kv2: 4 heads of 8 over 2
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const GptConfig cg = config_of(arch, dt, GptAttention::kGemm);
    const GptConfig cf = config_of(arch, dt, GptAttention::kFused);
    ModelRun g(cg, 1), f(cf, 1);
    EXPECT_EQ(f.model.activation_bytes(), f.model.activation_plan().total());
    EXPECT_EQ(f.tracker.current(MemCategory::kActivations), f.model.activation_plan().total());
    const ActivationPlan pg = g.model.activation_plan(), pf = f.model.activation_plan();
    const int64_t B = cg.run.batch, T = cg.arch.context, H = cg.arch.heads, KV = 2, hd = 8;
    const int64_t M = B * T, D = H * hd, L = cg.arch.layers, e = dt == DType::kF32 ? 4 : 2;
    const int64_t bhtt = B * H * T * T, lowp = dt == DType::kF32 ? 0 : 1;
    const int64_t Tp = FlashAttention::padded_context(static_cast<int>(T));
    const int64_t block = bhtt * 4 + lowp * bhtt * e + 2 * (M * D - M * KV * hd) * e - M * H * 4 -
                          2 * B * KV * hd * Tp * e;
    const int64_t work = bhtt * 4 + lowp * bhtt * e + M * D * (4 + e + 3 * 4) -
                         FlashAttention::tiles_bytes(hd, cg.run.threads);
    EXPECT_EQ(pg.blocks - pf.blocks, L * block);
    EXPECT_EQ(pg.workspace - pf.workspace, work);
    EXPECT_EQ(pf.gemm_workspace,
              gpt_cpu_gemm_workspace_bytes(GptActivationDims::of(cf), this_process_cpu_gemm()));
    std::printf(
        "  %s: activations %lld -> %lld bytes (blocks %lld -> %lld, workspace %lld -> "
        "%lld)\n",
        std::string(dtype_name(dt)).c_str(), static_cast<long long>(pg.total()),
        static_cast<long long>(pf.total()), static_cast<long long>(pg.blocks),
        static_cast<long long>(pf.blocks), static_cast<long long>(pg.workspace),
        static_cast<long long>(pf.workspace));
  }
}

}  // namespace
}  // namespace zs::nn
