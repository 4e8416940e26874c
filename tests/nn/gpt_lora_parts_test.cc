// LoRA on parts of the fused linears (Hugging Face's Llama modules q_proj, k_proj, v_proj,
// gate_proj, up_proj: row ranges of our qkv and fc, models/gpt/gpt_adapters.h) against the same
// update written as one adapter of the whole fused linear: rank-r adapters on the parts equal one
// adapter of rank 3r on qkv (and on fc) whose A stacks the parts' A and whose B is block-diagonal
// in the parts' B, at the same scale. Loss and every adapter gradient agree (fp32, 1e-5 relative);
// the name aliases and the target checks are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_adapters.h"
#include "models/gpt/gpt_specs.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

constexpr int kRank = 2;

// A tiny Llama: RMSNorm, rotary, SwiGLU, no biases, 4 query heads over 2 KV heads.
GptConfig llama_config(std::vector<GptLoraTarget> targets, int rank, float alpha) {
  GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 4;
  c.arch.kv_heads = 2;
  c.arch.width = 32;
  c.arch.context = 8;
  c.arch.vocab = 64;
  c.arch.ffn = 48;
  c.arch.norm = NormKind::kRMSNorm;
  c.arch.positions = PositionKind::kRotary;
  c.arch.mlp = MlpKind::kSwiGLU;
  c.arch.qkv_bias = c.arch.proj_bias = c.arch.mlp_bias = false;
  c.run.batch = 2;
  c.run.threads = 1;
  c.adapters.lora.rank = rank;
  c.adapters.lora.alpha = alpha;
  c.adapters.lora.targets = std::move(targets);
  c.adapters.lora.freeze_base = true;
  return c;
}

// The index of parameter `name` in unit `u` of `h`.
size_t index_of(UnitHarness& h, size_t u, const std::string& name) {
  for (size_t i = 0; i < h.num_params(u); ++i)
    if (h.spec(u, i).name == name) return i;
  ADD_FAILURE() << "no parameter " << name;
  return 0;
}

std::vector<float>& param(UnitHarness& h, size_t u, const std::string& name) {
  return h.master(u, index_of(h, u, name));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  EXPECT_GT(den, 0.0) << what << ": a zero gradient checks nothing";
  EXPECT_LE(std::sqrt(num / den), 1e-5) << what;
}

// One fused adapter `whole` built from the parts' adapters (rank kRank each).
struct Fusion {
  std::string whole;
  std::vector<GptLoraTarget> parts;
};

// Writes the fused A (parts' A stacked) and B (block-diagonal) of `f` in block unit u of `fused`
// from `split`.
void fuse(UnitHarness& split, UnitHarness& fused, size_t u, const Fusion& f,
          const GptArchitecture& arch) {
  const int64_t R = 3 * kRank;  // the fused rank
  std::vector<float>& a = param(fused, u, f.whole + ".lora_A");
  std::vector<float>& b = param(fused, u, f.whole + ".lora_B");
  std::fill(a.begin(), a.end(), 0.0f);
  std::fill(b.begin(), b.end(), 0.0f);
  for (size_t k = 0; k < f.parts.size(); ++k) {
    const std::string name = gpt_lora_target_name(f.parts[k]);
    const std::vector<float>& pa = param(split, u, name + ".lora_A");
    const std::vector<float>& pb = param(split, u, name + ".lora_B");
    std::copy(pa.begin(), pa.end(),
              a.begin() + static_cast<int64_t>(k) * static_cast<int64_t>(pa.size()));
    const int64_t row0 = gpt_lora_row_offset(f.parts[k], arch);
    const int64_t rows = static_cast<int64_t>(pb.size()) / kRank;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kRank; ++j)
        b[static_cast<size_t>((row0 + i) * R + static_cast<int64_t>(k) * kRank + j)] =
            pb[static_cast<size_t>(i * kRank + j)];
  }
}

// The part of the fused gradients that belongs to part k, to compare with the part's own.
void expect_part_grads(UnitHarness& split, UnitHarness& fused, size_t u, const Fusion& f,
                       const GptArchitecture& arch) {
  const int64_t R = 3 * kRank;
  const std::vector<float>& ga = fused.grad(u, index_of(fused, u, f.whole + ".lora_A"));
  const std::vector<float>& gb = fused.grad(u, index_of(fused, u, f.whole + ".lora_B"));
  for (size_t k = 0; k < f.parts.size(); ++k) {
    const std::string name = gpt_lora_target_name(f.parts[k]);
    const std::vector<float>& pa = split.grad(u, index_of(split, u, name + ".lora_A"));
    const std::vector<float>& pb = split.grad(u, index_of(split, u, name + ".lora_B"));
    const auto a0 = ga.begin() + static_cast<int64_t>(k) * static_cast<int64_t>(pa.size());
    expect_close(pa, std::vector<float>(a0, a0 + static_cast<int64_t>(pa.size())), name + " dA");
    const int64_t row0 = gpt_lora_row_offset(f.parts[k], arch);
    std::vector<float> want(pb.size());
    for (size_t i = 0; i < pb.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i) / kRank, j = static_cast<int64_t>(i) % kRank;
      want[i] = gb[static_cast<size_t>((row0 + r) * R + static_cast<int64_t>(k) * kRank + j)];
    }
    expect_close(pb, want, name + " dB");
  }
}

TEST(GptLoraParts, PartsEqualOneBlockDiagonalAdapterOfTheFusedLinear) {
  using T = GptLoraTarget;
  const float alpha = 4.0f;  // s = alpha / r for the parts; the fused rank 3r gets 3 alpha
  // fc has two parts: the fused fc adapter has rank 3r too, its third block left zero.
  const GptConfig cs = llama_config({T::kQ, T::kK, T::kV, T::kGate, T::kUp}, kRank, alpha);
  const GptConfig cf = llama_config({T::kQkv, T::kFc}, 3 * kRank, 3 * alpha);
  GptModel split(cs), fused(cf);
  UnitHarness hs(split, DType::kF32, 3), hf(fused, DType::kF32, 3);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  for (size_t u = 0; u < hs.num_units(); ++u)
    for (size_t i = 0; i < hs.num_params(u); ++i)
      if (hs.spec(u, i).name.find("lora_B") != std::string::npos)
        for (float& x : hs.master(u, i)) x = nd(rng);
  hs.refresh();
  for (size_t u = 0; u < hs.num_units(); ++u) {  // the same base
    for (size_t i = 0; i < hs.num_params(u); ++i)
      if (hs.spec(u, i).name.find(".lora_") == std::string::npos)
        param(hf, u, hs.spec(u, i).name) = hs.master(u, i);
    if (u == 0 || u + 1 == hs.num_units()) continue;
    fuse(hs, hf, u, {"qkv", {T::kQ, T::kK, T::kV}}, cs.arch);
    fuse(hs, hf, u, {"fc", {T::kGate, T::kUp}}, cs.arch);
  }
  hf.refresh();
  std::vector<int32_t> tokens(static_cast<size_t>(cs.run.batch) * (cs.arch.context + 1));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % 64);
  for (GptModel* m : {&split, &fused}) {
    m->set_tokens(tokens);
    m->load_micro_batch(0);
  }
  hs.forward();
  hf.forward();
  EXPECT_NEAR(split.loss(), fused.loss(), 1e-5 * std::abs(fused.loss()));
  hs.backward();
  hf.backward();
  for (size_t u = 1; u + 1 < hs.num_units(); ++u) {
    expect_part_grads(hs, hf, u, {"qkv", {T::kQ, T::kK, T::kV}}, cs.arch);
    expect_part_grads(hs, hf, u, {"fc", {T::kGate, T::kUp}}, cs.arch);
  }
}

TEST(GptLoraParts, NamesAliasesAndChecks) {
  using T = GptLoraTarget;
  EXPECT_EQ(parse_gpt_lora_targets("q_proj,v_proj,o_proj,down_proj"),
            (std::vector<T>{T::kQ, T::kV, T::kProj, T::kFcProj}));
  EXPECT_EQ(parse_gpt_lora_targets("c_attn,c_proj,c_fc"),
            (std::vector<T>{T::kQkv, T::kProj, T::kFcProj, T::kFc}));
  EXPECT_EQ(format_gpt_lora_targets(parse_gpt_lora_targets("o_proj,gate_proj")), "proj,gate_proj");
  try {
    parse_gpt_lora_targets("proj,o_proj");
    ADD_FAILURE() << "a repeat through an alias was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "gpt config: lora target \"o_proj\" is given twice");
  }
  GptConfig c = llama_config({T::kQkv, T::kQ}, kRank, 8.0f);
  try {
    c.validate();
    ADD_FAILURE() << "overlapping targets were taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "gpt config: lora targets qkv and q_proj overlap (q_proj is part of the fused qkv)");
  }
  c = llama_config({T::kGate}, kRank, 8.0f);
  c.arch.mlp = MlpKind::kGelu;
  try {
    c.validate();
    ADD_FAILURE() << "gate_proj without SwiGLU was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "gpt config: lora target gate_proj needs the SwiGLU MLP (mlp swiglu; this model's "
              "is gelu)");
  }
  // Shapes and offsets of the parts in a model with 2 KV heads of 8 dims and F = 48.
  const GptArchitecture a = llama_config({}, 0, 8.0f).arch;
  int64_t in = 0, out = 0;
  gpt_lora_linear_shape(T::kK, a, &in, &out);
  EXPECT_EQ(in, 32);
  EXPECT_EQ(out, 16);
  EXPECT_EQ(gpt_lora_row_offset(T::kV, a), 32 + 16);
  gpt_lora_linear_shape(T::kUp, a, &in, &out);
  EXPECT_EQ(out, 48);
  EXPECT_EQ(gpt_lora_row_offset(T::kUp, a), 48);
}

}  // namespace
}  // namespace zs::nn
