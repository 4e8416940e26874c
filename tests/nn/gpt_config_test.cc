// The GPT's description in three parts (models/gpt/gpt_config.h): the architecture's validation
// naming the field, its parameter counts, the run settings' and the whole config's checks, and the
// LoRA targets parsed from and printed as their names (a round trip; unknown and repeated names
// refused by name).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/gpt/gpt_config.h"
#include "nn/kernels.h"

namespace zs::nn {
namespace {

// Runs f, which must throw zs::Error(kInvalidArgument) with exactly `message`.
void expect_invalid(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(GptArchitecture, DefaultsAreValidAndCounted) {
  const GptArchitecture a;
  EXPECT_NO_THROW(a.validate());
  EXPECT_EQ(a.ffn_width(), 1024);
  // C = 256, F = 1024, V = 256, T = 128, L = 4: embeddings (V + T) C, per block
  // 2C + 3C^2 + 3C + C^2 + C + 2C + FC + F + CF + C, head 2C + VC.
  const int64_t C = 256, F = 1024, V = 256, T = 128;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
  EXPECT_EQ(a.num_block_params(), block);
  EXPECT_EQ(a.num_params(), (V + T) * C + 4 * block + 2 * C + V * C);
  GptConfig c;
  EXPECT_EQ(c.num_params(), a.num_params());  // no adapters
  EXPECT_EQ(c.num_trainable_params(), a.num_params());
}

TEST(GptArchitecture, RefusesNamingTheField) {
  struct Case {
    std::function<void(GptArchitecture&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& a) { a.layers = 0; }, "gpt config: layers must be positive, got 0"},
      {[](auto& a) { a.heads = -2; }, "gpt config: heads must be positive, got -2"},
      {[](auto& a) { a.width = 0; }, "gpt config: width must be positive, got 0"},
      {[](auto& a) { a.context = 0; }, "gpt config: context must be positive, got 0"},
      {[](auto& a) { a.vocab = 0; }, "gpt config: vocab must be positive, got 0"},
      {[](auto& a) { a.ffn_mult = 0; }, "gpt config: ffn_mult must be positive, got 0"},
      {[](auto& a) { a.heads = 3; },
       "gpt config: width 256 must divide by heads 3 (or set head_dim)"},
      {[](auto& a) {
         a.width = kMaxRow + 64;
         a.heads = 1;
       },
       "gpt config: width " + std::to_string(kMaxRow + 64) + " must be at most " +
           std::to_string(kMaxRow)},
      {[](auto& a) { a.layers = 100001; },
       "gpt config: layers 100001 (at most 100000) or ffn_mult 4 (at most 64) too large"},
      {[](auto& a) { a.ffn_mult = 65; },
       "gpt config: layers 4 (at most 100000) or ffn_mult 65 (at most 64) too large"},
  };
  for (const Case& c : cases) {
    GptArchitecture a;
    c.edit(a);
    expect_invalid([&] { a.validate(); }, c.message);
    GptConfig g;  // the whole config refuses it with the same message
    g.arch = a;
    expect_invalid([&] { g.validate(); }, c.message);
  }
}

TEST(GptRunSettings, RefusesNamingTheField) {
  GptRunSettings r;
  EXPECT_NO_THROW(r.validate());
  r.batch = 0;
  expect_invalid([&] { r.validate(); }, "gpt config: batch must be positive, got 0");
  r = {};
  r.compute_dtype = DType::kI8;
  expect_invalid([&] { r.validate(); },
                 "gpt config: compute dtype must be fp32, bf16 or fp16, got int8");
  r = {};
  r.threads = 1025;
  expect_invalid([&] { r.validate(); }, "gpt config: threads 1025 is outside 0..1024");
  // What architecture and run bound together: tokens per micro-batch.
  GptConfig c;
  c.arch.context = 1 << 20;
  c.run.batch = 32;
  expect_invalid([&] { c.validate(); },
                 "gpt config: batch 32 x context 1048576 = 33554432 tokens per micro-batch, more "
                 "than the 16777216 allowed");
}

TEST(GptLoraTargets, ParseAndPrintRoundTrip) {
  using T = GptLoraTarget;
  EXPECT_EQ(parse_gpt_lora_targets("qkv,proj,fc,fc_proj"),
            (std::vector<T>{T::kQkv, T::kProj, T::kFc, T::kFcProj}));
  // The order given is kept (manifests and PEFT files list the targets so).
  const std::vector<T> some = parse_gpt_lora_targets("fc_proj,qkv");
  EXPECT_EQ(some, (std::vector<T>{T::kFcProj, T::kQkv}));
  EXPECT_EQ(format_gpt_lora_targets(some), "fc_proj,qkv");
  EXPECT_EQ(gpt_lora_target_names(some), (std::vector<std::string>{"fc_proj", "qkv"}));
  EXPECT_EQ(gpt_lora_targets_from_names(gpt_lora_target_names(some)), some);
  for (int t = 0; t < kNumGptLoraTargets; ++t) {
    const T target = static_cast<T>(t);
    EXPECT_EQ(gpt_lora_target_from_name(gpt_lora_target_name(target)), target);
    EXPECT_EQ(parse_gpt_lora_targets(gpt_lora_target_name(target)), std::vector<T>{target});
  }
  // Aliases are names of the list parser, not canonical names.
  EXPECT_EQ(gpt_lora_target_from_name("c_attn"), std::nullopt);
  EXPECT_EQ(
      gpt_lora_allowed_targets(),
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases o_proj, "
      "down_proj, c_attn, c_fc, c_proj");
  // The default adapts every linear, in GptLoraTarget order.
  EXPECT_EQ(format_gpt_lora_targets(GptLoraConfig{}.targets), "qkv,proj,fc,fc_proj");
}

TEST(GptLoraTargets, RefusesUnknownAndRepeatedNames) {
  expect_invalid(
      [] { parse_gpt_lora_targets("qkv,mlp"); },
      "gpt config: lora target \"mlp\" is not one of "
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases "
      "o_proj, down_proj, c_attn, c_fc, c_proj");
  expect_invalid(
      [] { parse_gpt_lora_targets(""); },
      "gpt config: lora target \"\" is not one of "
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases "
      "o_proj, down_proj, c_attn, c_fc, c_proj");
  expect_invalid(
      [] { parse_gpt_lora_targets("qkv,,fc"); },
      "gpt config: lora target \"\" is not one of "
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases "
      "o_proj, down_proj, c_attn, c_fc, c_proj");
  expect_invalid(
      [] { parse_gpt_lora_targets("QKV"); },
      "gpt config: lora target \"QKV\" is not one of "
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases "
      "o_proj, down_proj, c_attn, c_fc, c_proj");
  expect_invalid([] { parse_gpt_lora_targets("fc,proj,fc"); },
                 "gpt config: lora target \"fc\" is given twice");
  expect_invalid(
      [] {
        gpt_lora_targets_from_names(std::vector<std::string>{"proj", "proj"});
      },
      "gpt config: lora target \"proj\" is given twice");
}

TEST(GptAdapters, ValidateAndCount) {
  GptAdapters ad;
  EXPECT_NO_THROW(ad.validate());
  const GptArchitecture a;                        // C = 256, F = 1024
  EXPECT_EQ(ad.num_lora_params_per_block(a), 0);  // rank 0: none
  ad.lora.rank = 2;
  ad.lora.targets = {GptLoraTarget::kFc, GptLoraTarget::kProj};
  EXPECT_EQ(ad.lora.target_mask(), 0b0110u);
  EXPECT_EQ(ad.num_lora_params_per_block(a), 2 * (256 + 1024) + 2 * (256 + 256));
  GptConfig c;
  c.adapters = ad;
  EXPECT_EQ(c.num_params(), a.num_params() + 4 * ad.num_lora_params_per_block(a));
  EXPECT_EQ(c.num_trainable_params(), 4 * ad.num_lora_params_per_block(a));  // frozen base
  ad.int8.outlier_threshold = -1.0f;
  expect_invalid([&] { ad.validate(); },
                 "gpt config: int8.outlier_threshold -1 must be a finite number >= 0 (0 = off)");
}

}  // namespace
}  // namespace zs::nn
