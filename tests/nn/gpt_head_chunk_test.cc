// GptModel with its LM head in row chunks (GptRunSettings::head_chunk, [Note: chunked head] in
// nn/lm_head.h) against the same model unchunked: the loss, the inference logits and every
// gradient but the LM head weight's bit for bit (dx of the head is; the blocks see the same
// gradient); the LM head weight's (a tied wte's) within the note's bound; the logits buffer and the
// activation plan shrink to one chunk's rows. The GPT-2 and Llama forms, tied embeddings included,
// in fp32, bf16 and fp16. Bit for bit where a row's product bits do not depend on the other rows
// (oneDNN's AVX-512 kernels, lm_head_test); elsewhere (the AVX2 twin, Eigen) lm_head_test holds the
// head to its derived bounds and this test the model to tolerances: the loss within 1e-5
// relative, each gradient within 1e-3 of its largest element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_specs.h"
#include "nn/gemm.h"
#include "tests/nn/gpt_arch_cases.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

using testing::ArchCase;

// A model and its host parameters and gradients.
struct ModelRun {
  MemoryTracker tracker;
  GptModel model;
  UnitHarness host;
  ModelRun(const GptConfig& c, uint64_t seed)
      : model(c, &tracker), host(model, c.run.compute_dtype, seed) {}
};

GptConfig config_of(const ArchCase& arch, DType dt, int64_t head_chunk) {
  GptConfig c = testing::tiny_config(arch, dt);
  c.arch.vocab = 96;
  c.run.batch = 3;  // M = 48
  c.run.head_chunk = head_chunk;
  return c;
}

// Every parameter moved away from its init, so every path carries signal.
void perturb(UnitHarness& h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (size_t u = 0; u < h.num_units(); ++u)
    for (size_t i = 0; i < h.num_params(u); ++i)
      for (float& x : h.master(u, i)) x += nd(rng);
  h.refresh();
}

std::vector<int32_t> random_tokens(const GptConfig& c, int micro_batches, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// As lm_head_test's: oneDNN's brgemm AVX-512 kernels, not widened.
bool rows_exact(const GptConfig& c) {
  const DType mm = c.run.compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const GemmPath& g = gemm_path(mm);
  return gemm_uses_onednn() && !g.widened && g.name.find("brg:avx512") != std::string::npos;
}

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// [Note: chunked head]'s bound on the LM head weight's gradient, from what bounds its terms here:
// |dlogits| <= scale / M per element, so sum_i |dl_i| |x_i| <= scale max |x|, and the final norm's
// output has |x| <= sqrt(C) max |w| + max |b| (a normalised row has sum x^2 <= C); rounded to
// bf16 when the products are bf16 (the 1.01).
double lm_head_bound(ModelRun& r, const GptConfig& c, float scale) {
  const GptHeadLayout lay = GptHeadLayout::of(c.arch);
  const size_t head = r.host.num_units() - 1;
  const double w = max_abs(r.host.master(head, static_cast<size_t>(lay.ln_w)));
  const double b = lay.ln_b >= 0 ? max_abs(r.host.master(head, static_cast<size_t>(lay.ln_b))) : 0;
  const double M = static_cast<double>(c.run.batch) * c.arch.context;
  const double u = std::ldexp(1.0, -24), g = (M + 1) * u / (1.0 - (M + 1) * u);
  return 2.0 * g * scale * (std::sqrt(static_cast<double>(c.arch.width)) * w + b) * 1.01;
}

TEST(GptHeadChunk, SameLossLogitsAndGradients) {
  GptArchitecture base;
  base.width = 32;
  base.heads = 4;
  for (const ArchCase& arch : testing::gpt2_and(base, {"llama_kv2", "llama_tied", "gpt2_tied"}))
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      const GptConfig c0 = config_of(arch, dt, kGptHeadChunkOff);
      ModelRun whole(c0, 5);
      perturb(whole.host, 9);
      const auto tokens = random_tokens(c0, 2, 13);
      for (int64_t chunk : {int64_t{5}, int64_t{16}, int64_t{47}}) {
        SCOPED_TRACE(::testing::Message()
                     << arch.name << " " << dtype_name(dt) << " chunk " << chunk);
        const GptConfig c = config_of(arch, dt, chunk);
        ModelRun r(c, 5);
        perturb(r.host, 9);
        const size_t head = r.host.num_units() - 1;
        const size_t lm = static_cast<size_t>(GptHeadLayout::of(c.arch).lm_head);
        for (int mb = 0; mb < 2; ++mb) {
          const float scale = mb == 0 ? 1.0f : 1024.0f;
          whole.model.set_tokens(tokens);
          r.model.set_tokens(tokens);
          whole.model.load_micro_batch(mb);
          r.model.load_micro_batch(mb);
          whole.host.forward();
          r.host.forward();
          const bool exact = rows_exact(c);
          if (exact)
            EXPECT_EQ(whole.model.loss(), r.model.loss());
          else
            EXPECT_NEAR(whole.model.loss(), r.model.loss(), 1e-5 * whole.model.loss());
          whole.host.backward(scale);
          r.host.backward(scale);
          const double bound = lm_head_bound(r, c, scale);
          const std::vector<float>& lm_whole = whole.host.grad(head, lm);
          for (size_t u = 0; u < r.host.num_units(); ++u)
            for (size_t i = 0; i < r.host.num_params(u); ++i) {
              const std::vector<float>& a = whole.host.grad(u, i);
              const std::vector<float>& b = r.host.grad(u, i);
              ASSERT_EQ(a.size(), b.size());
              if (!exact) {
                const double tol = 1e-3 * max_abs(a) + 1e-12;
                for (size_t j = 0; j < a.size(); ++j)
                  ASSERT_LE(std::fabs(static_cast<double>(a[j]) - b[j]), tol)
                      << "unit " << u << " " << r.host.spec(u, i).name << " [" << j << "]";
                continue;
              }
              if (&a != &lm_whole) {  // not the LM head weight (nor the wte tied to it)
                EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4 * a.size()))
                    << "unit " << u << " " << r.host.spec(u, i).name;
                continue;
              }
              // A tied wte adds the embedding's gradient after: one more rounding each.
              double worst = 0.0;
              for (size_t j = 0; j < a.size(); ++j) {
                const double d = std::fabs(static_cast<double>(a[j]) - b[j]);
                const double tie = c.arch.tied_embeddings
                                       ? std::ldexp(std::fabs(a[j]) + std::fabs(b[j]), -24)
                                       : 0.0;
                worst = std::max(worst, d / (bound + tie));
              }
              EXPECT_LE(worst, 1.0) << "LM head gradient past the bound " << bound;
            }
        }
        // Inference: the last position's logits, bit for bit.
        const int32_t prompt[] = {3, 1, 4, 1, 5, 9, 2};
        whole.model.set_inference_input(prompt, 7);
        r.model.set_inference_input(prompt, 7);
        whole.host.forward(false);
        r.host.forward(false);
        const auto la = whole.model.last_logits(), lb = r.model.last_logits();
        if (rows_exact(c)) {
          EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), 4 * la.size()));
        } else {
          for (size_t v = 0; v < la.size(); ++v) EXPECT_NEAR(la[v], lb[v], 1e-5);
        }
      }
    }
}

// The logits buffer holds one chunk: the plan (which the model allocates from) and the tracker
// shrink by the rows the chunk leaves out, and auto stays unchunked below its bound.
TEST(GptHeadChunk, LogitsBufferIsOneChunk) {
  const ArchCase arch = testing::tiny_archs()[0];
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const GptConfig off = config_of(arch, dt, kGptHeadChunkOff);
    const GptConfig aut = config_of(arch, dt, kGptHeadChunkAuto);
    const GptConfig chunked = config_of(arch, dt, 5);
    const GptActivationDims d = GptActivationDims::of(chunked);
    EXPECT_EQ(GptActivationDims::of(off).head_rows(), 48);
    EXPECT_EQ(GptActivationDims::of(aut).head_rows(), 48) << "auto below its bound";
    EXPECT_EQ(d.head_rows(), 5);
    const GptBufferTable t = gpt_buffer_table(d, DeviceKind::kCpu);
    EXPECT_EQ(t.row("logits"), 5 * 96 * 4);
    EXPECT_EQ(gpt_buffer_table(GptActivationDims::of(off), DeviceKind::kCpu).row("logits"),
              48 * 96 * 4);
    ModelRun a(off, 1), b(chunked, 1);
    EXPECT_EQ(b.model.activation_bytes(), b.model.activation_plan().total());
    EXPECT_EQ(b.tracker.current(MemCategory::kActivations), b.model.activation_plan().total());
    // Here V < max(F, 3C): the gradient temporaries keep their size, and only the logits shrink
    // (oneDNN's scratchpads of the chunk's products aside).
    const ActivationPlan pa = a.model.activation_plan(), pb = b.model.activation_plan();
    EXPECT_EQ(pa.head - pb.head, 43 * 96 * 4);
    EXPECT_EQ(pa.total() - pa.gemm_scratchpads - (pb.total() - pb.gemm_scratchpads), 43 * 96 * 4);
  }
}

TEST(GptHeadChunk, AutoRowsAndBadSettings) {
  // Llama-3's vocabulary: 2 x 1024 rows of fp32 logits are 1.05 GB > 256 MiB: chunks of
  // 32 MiB / (4 x 128256) = 65 rows; 524 rows (268.8 MB) too; 523 rows (268.3 MB <= 256 MiB) not.
  EXPECT_EQ(gpt_head_chunk_rows(2048, 128256, kGptHeadChunkAuto), 65);
  EXPECT_EQ(gpt_head_chunk_rows(524, 128256, kGptHeadChunkAuto), 65);
  EXPECT_EQ(gpt_head_chunk_rows(523, 128256, kGptHeadChunkAuto), 523);
  EXPECT_EQ(gpt_head_chunk_rows(2048, 128256, kGptHeadChunkOff), 2048);
  EXPECT_EQ(gpt_head_chunk_rows(2048, 128256, 100), 100);
  EXPECT_EQ(gpt_head_chunk_rows(2048, 128256, 5000), 2048);
  // A vocabulary wider than the chunk's bytes: one row per chunk.
  EXPECT_EQ(gpt_head_chunk_rows(1 << 20, int64_t{16} << 20, kGptHeadChunkAuto), 1);
  GptConfig c = config_of(testing::tiny_archs()[0], DType::kF32, -2);
  try {
    c.validate();
    ADD_FAILURE() << "head_chunk -2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt config: head_chunk -2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zs::nn
