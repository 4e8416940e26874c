// The whole GptModel's gradient (every parameter tensor, through every unit) against central
// finite differences of its fp32 loss. Per-layer checks live in test_nn_layers.cc; this one
// catches wiring errors between layers (residual stream, positions, heads, batch strides), for
// GPT-2 and for the Llama-form architectures of gpt_arch_cases.h (RMSNorm, rotary positions,
// SwiGLU, grouped-query attention, biases per projection, an ffn not a multiple of the width).
#include <cmath>
#include <cstdio>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/gpt/gpt.h"
#include "tests/nn/gpt_arch_cases.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

struct Shape {
  int width, heads, context, batch;
};

// A shape and the architecture's components (GPT-2's by default).
struct GradCase {
  Shape s;
  testing::ArchCase arch{"gpt2", GptArchitecture{}};
  int lora_rank = 0;  // > 0: LoRA adapters on qkv, proj, fc, fc_proj, base trainable too
};

std::string grad_case_name(const GradCase& c) {
  const Shape& s = c.s;
  return c.arch.name + "_w" + std::to_string(s.width) + "_h" + std::to_string(s.heads) + "_t" +
         std::to_string(s.context) + "_b" + std::to_string(s.batch) +
         (c.lora_rank > 0 ? "_lora" + std::to_string(c.lora_rank) : "");
}
std::string case_name(const ::testing::TestParamInfo<GradCase>& i) {
  return grad_case_name(i.param);
}
// gtest prints a case by its name.
void PrintTo(const GradCase& c, std::ostream* os) { *os << grad_case_name(c); }

class NnGptGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(NnGptGrad, WholeModelMatchesFiniteDifferences) {
  const Shape s = GetParam().s;
  GptConfig c;
  c.arch = GetParam().arch.arch;
  c.arch.layers = 2;
  c.arch.heads = s.heads;
  c.arch.width = s.width;
  c.arch.context = s.context;
  c.arch.vocab = 256;
  c.run.batch = s.batch;
  c.run.threads = 1;
  c.adapters.lora.rank = GetParam().lora_rank;
  c.adapters.lora.freeze_base = false;
  GptModel m(c);
  UnitHarness h(m, DType::kF32, 11);
  // Larger weights than GPT-2's init, so attention is far from uniform and every path matters.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (size_t u = 0; u < h.num_units(); ++u)
    for (size_t p = 0; p < h.num_params(u); ++p)
      for (float& x : h.master(u, p)) x += nd(rng);
  h.refresh();
  std::vector<int32_t> tokens(static_cast<size_t>(c.run.batch) * (c.arch.context + 1));
  std::uniform_int_distribution<int> td(0, c.arch.vocab - 1);
  for (auto& t : tokens) t = td(rng);
  m.set_tokens(tokens);
  m.load_micro_batch(0);
  auto loss = [&] {
    h.forward();
    return m.loss();
  };
  loss();
  h.backward(1.0f);
  double worst = 0.0;
  for (size_t u = 0; u < h.num_units(); ++u) {
    for (size_t p = 0; p < h.num_params(u); ++p) {
      std::vector<float>& w = h.master(u, p);
      const std::vector<float> g = h.grad(u, p);
      // Element k from the k-th sixth of the tensor, so every row block of a fused weight is
      // checked (q, k and v of qkv, gate and up of a SwiGLU fc). For the embeddings pick rows
      // that the batch actually uses half of the time.
      for (size_t k = 0; k < 6; ++k) {
        std::uniform_int_distribution<size_t> pick(k * w.size() / 6, (k + 1) * w.size() / 6 - 1);
        size_t i = pick(rng);
        if (h.spec(u, p).name == "wte" && k % 2 == 0) i = tokens[k] * c.arch.width + k;
        const float saved = w[i];
        const float eps = 2e-3f;
        w[i] = saved + eps;
        h.refresh();
        const double lp = loss();
        w[i] = saved - eps;
        h.refresh();
        const double lm = loss();
        w[i] = saved;
        h.refresh();
        const double num = (lp - lm) / (2.0 * eps);
        // fp32 loss differences resolve about 1e-6 / (2 eps) = 2.5e-4 of gradient.
        const double err = std::abs(num - g[i]) / (1e-2 + std::abs(num));
        worst = std::max(worst, err);
        EXPECT_LT(err, 5e-2) << "unit " << u << " param " << h.spec(u, p).name << " element " << i
                             << ": analytic " << g[i] << " numeric " << num;
      }
    }
  }
  std::printf("whole-model gradient vs finite differences: worst relative error %.3g\n", worst);
}

// Short and long contexts (long: past every SIMD/tile width of the attention kernels), head
// widths 16 and 32, batches of 1 and 3.
INSTANTIATE_TEST_SUITE_P(Shapes, NnGptGrad,
                         ::testing::Values(GradCase{Shape{32, 2, 12, 3}},
                                           GradCase{Shape{64, 4, 100, 2}},
                                           GradCase{Shape{64, 2, 130, 1}}),
                         case_name);

// Every Llama-form case at four heads of 8 (short context, batch 3), all-Llama with GQA at a
// long context (rotary angles of positions up to 99, the attention kernels' tiles), and LoRA
// adapters (rank 4, every target) on all-Llama with GQA and on Qwen2-like.
std::vector<GradCase> llama_grad_cases() {
  GptArchitecture base;
  base.width = 32;
  std::vector<GradCase> v;
  for (const testing::ArchCase& a : testing::llama_form_cases(base))
    v.push_back({Shape{32, 4, 12, 3}, a});
  base.width = 64;
  v.push_back({Shape{64, 4, 100, 2}, testing::llama_form_cases(base)[1]});
  // LoRA on every fused linear of the Llama form (the perturbation makes B non-zero): the
  // adapters' gradients on the GQA qkv [Q, C] and the SwiGLU fc [2F, C].
  base.width = 32;
  v.push_back({Shape{32, 4, 12, 2}, testing::llama_form_cases(base)[1], 4});
  v.push_back({Shape{32, 4, 12, 2}, testing::llama_form_cases(base)[3], 4});
  return v;
}
INSTANTIATE_TEST_SUITE_P(LlamaForm, NnGptGrad, ::testing::ValuesIn(llama_grad_cases()), case_name);

}  // namespace
}  // namespace zs::nn
