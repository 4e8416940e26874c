// The architecture flags zs_train and zs_plan share (apps/common/model_options.h): zs_train's
// defaults shown and taken, zs_plan's absent flags leaving its base alone, and the same flags
// giving the same architecture in both programs' declarations.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "apps/common/model_options.h"
#include "core/error.h"
#include "models/gpt/transformer_shapes.h"

namespace po = boost::program_options;

namespace zs::apps {
namespace {

const nn::GptArchitecture kZsTrain = {
    .layers = 4, .heads = 4, .width = 128, .context = 128, .vocab = 256, .ffn_mult = 4};

po::variables_map parse(const po::options_description& desc, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  po::variables_map vm;
  po::store(po::parse_command_line(static_cast<int>(argv.size()), argv.data(), desc), vm);
  po::notify(vm);
  return vm;
}

po::options_description zs_train_flags() {
  po::options_description d;
  add_architecture_options(d, &kZsTrain, true);
  return d;
}

po::options_description zs_plan_flags() {
  po::options_description d;
  add_architecture_options(d, nullptr, true);
  return d;
}

TEST(ModelOptions, TrainGptTakesAndShowsItsDefaults) {
  const po::options_description d = zs_train_flags();
  std::ostringstream help;
  help << d;
  EXPECT_NE(help.str().find("--layers arg (=4)"), std::string::npos) << help.str();
  EXPECT_NE(help.str().find("--width arg (=128)"), std::string::npos) << help.str();
  EXPECT_NE(help.str().find("--vocab arg (=256)"), std::string::npos) << help.str();
  const po::variables_map none = parse(d, {});
  EXPECT_FALSE(architecture_options_given(none));
  EXPECT_EQ(architecture_from_options(none, nn::GptArchitecture{}), kZsTrain);
  const po::variables_map some = parse(d, {"--layers", "6", "--width", "64"});
  EXPECT_TRUE(architecture_options_given(some));
  nn::GptArchitecture want = kZsTrain;
  want.layers = 6;
  want.width = 64;
  EXPECT_EQ(architecture_from_options(some, kZsTrain), want);
  want.vocab = 300;  // token shards (issue 27): zs_train takes --vocab too
  EXPECT_EQ(architecture_from_options(
                parse(d, {"--layers", "6", "--width", "64", "--vocab", "300"}), kZsTrain),
            want);
}

TEST(ModelOptions, ZsPlanLeavesItsBaseWhereNoFlagIsGiven) {
  const po::options_description d = zs_plan_flags();
  std::ostringstream help;
  help << d;
  EXPECT_EQ(help.str().find("(="), std::string::npos) << help.str();
  nn::TransformerShape shape = *nn::transformer_shape_by_name("gpt2");
  const nn::TransformerShape gpt2 = shape;
  const po::variables_map none = parse(d, {});
  EXPECT_FALSE(architecture_options_given(none));
  apply_architecture_options(none, shape);
  EXPECT_EQ(shape.layers, gpt2.layers);
  EXPECT_EQ(shape.vocab, gpt2.vocab);
  const po::variables_map some = parse(d, {"--vocab", "300", "--context", "64"});
  EXPECT_TRUE(architecture_options_given(some));
  apply_architecture_options(some, shape);
  EXPECT_EQ(shape.vocab, 300);
  EXPECT_EQ(shape.context, 64);
  EXPECT_EQ(shape.layers, gpt2.layers);
  EXPECT_EQ(shape.width, gpt2.width);
}

TEST(ModelOptions, SameFlagsSameArchitectureInBothPrograms) {
  const std::vector<std::string> args = {"--layers", "2",  "--heads",   "2",
                                         "--width",  "64", "--context", "32"};
  const nn::GptArchitecture train =
      architecture_from_options(parse(zs_train_flags(), args), kZsTrain);
  // zs_plan with the same flags, on the vocabulary zs_train's bytes give.
  std::vector<std::string> plan_args = args;
  plan_args.insert(plan_args.end(), {"--vocab", "256"});
  nn::TransformerShape shape;
  apply_architecture_options(parse(zs_plan_flags(), plan_args), shape);
  const nn::TransformerShape from_train = nn::transformer_shape_of(train);
  EXPECT_EQ(shape.layers, from_train.layers);
  EXPECT_EQ(shape.heads, from_train.heads);
  EXPECT_EQ(shape.width, from_train.width);
  EXPECT_EQ(shape.context, from_train.context);
  EXPECT_EQ(shape.vocab, from_train.vocab);
  EXPECT_EQ(shape.ffn_width(), from_train.ffn_width());
  EXPECT_EQ(shape.num_params(), from_train.num_params());
}

TEST(ModelOptions, TrainGptDefaultsAreGpt2) {
  const nn::GptArchitecture a = architecture_from_options(parse(zs_train_flags(), {}), kZsTrain);
  EXPECT_EQ(a, kZsTrain);
  EXPECT_EQ(a.family(), "gpt-2");
  EXPECT_FALSE(component_options_given(parse(zs_train_flags(), {"--layers", "2"})));
  EXPECT_TRUE(component_options_given(parse(zs_train_flags(), {"--mlp-bias", "on"})));
}

TEST(ModelOptions, FamilyPresetAndComponentOverrides) {
  nn::GptArchitecture a = architecture_from_options(
      parse(zs_train_flags(), {"--family", "llama", "--kv-heads", "2", "--ffn", "344"}), kZsTrain);
  EXPECT_EQ(a.family(), "llama");
  EXPECT_EQ(a.norm, nn::NormKind::kRMSNorm);
  EXPECT_EQ(a.positions, nn::PositionKind::kRotary);
  EXPECT_EQ(a.mlp, nn::MlpKind::kSwiGLU);
  EXPECT_FALSE(a.qkv_bias || a.proj_bias || a.mlp_bias);
  EXPECT_EQ(a.kv_heads, 2);
  EXPECT_EQ(a.ffn_width(), 344);
  // A component flag overrides the preset; gpt is gpt2's other spelling.
  a = architecture_from_options(
      parse(zs_train_flags(), {"--family", "llama", "--norm", "layernorm", "--qkv-bias", "on",
                               "--rope-theta", "500000", "--norm-eps", "1e-6"}),
      kZsTrain);
  EXPECT_EQ(a.norm, nn::NormKind::kLayerNorm);
  EXPECT_TRUE(a.qkv_bias);
  EXPECT_FALSE(a.proj_bias);
  EXPECT_EQ(a.rope_theta, 500000.0f);
  EXPECT_EQ(a.norm_eps, 1e-6f);
  EXPECT_EQ(a.family(), "custom");
  a = architecture_from_options(parse(zs_train_flags(), {"--family", "gpt", "--mlp", "swiglu"}),
                                kZsTrain);
  EXPECT_EQ(a.mlp, nn::MlpKind::kSwiGLU);
  EXPECT_EQ(a.norm, nn::NormKind::kLayerNorm);
}

// The message architecture_from_options throws for `args` over the trainer's defaults.
std::string refusal(std::vector<std::string> args) {
  try {
    architecture_from_options(parse(zs_train_flags(), std::move(args)), kZsTrain);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ModelOptions, BadComponentFlagsAreRefusedByName) {
  EXPECT_EQ(refusal({"--norm", "batchnorm"}),
            "--norm 'batchnorm' is not one of layernorm, rmsnorm");
  EXPECT_EQ(refusal({"--family", "bert"}),
            "--family 'bert' is not one of gpt2, llama, qwen3 (gpt: gpt2)");
  EXPECT_EQ(refusal({"--qkv-bias", "yes"}), "--qkv-bias 'yes' is not one of off, on");
  EXPECT_EQ(refusal({"--kv-heads", "3"}),
            "--kv-heads 3 does not divide --heads 4 (each key/value head serves a group of query "
            "heads)");
  EXPECT_EQ(refusal({"--family", "llama", "--width", "36"}),
            "rotary positions (--family llama) need an even head dim: --width 36 / --heads 4 = 9");
  EXPECT_EQ(refusal({"--positions", "rotary", "--width", "36"}),
            "rotary positions (--positions rotary) need an even head dim: --width 36 / --heads 4 = "
            "9");
  EXPECT_EQ(refusal({"--ffn", "0"}), "--ffn 0 is outside 1..64 x --width (8192)");
  EXPECT_EQ(refusal({"--norm-eps", "0"}), "--norm-eps 0 is outside (0, 1)");
  EXPECT_EQ(refusal({"--head-dim", "0"}), "--head-dim 0 is outside 1..16384");
  EXPECT_EQ(refusal({"--family", "qwen3", "--head-dim", "9"}),
            "rotary positions (--family qwen3) need an even head dim: --head-dim 9");
}

TEST(ModelOptions, Qwen3FamilyAndHeadDim) {
  const nn::GptArchitecture a = architecture_from_options(
      parse(zs_train_flags(), {"--family", "qwen3", "--head-dim", "64", "--kv-heads", "2"}),
      kZsTrain);
  EXPECT_TRUE(a.qk_norm);
  EXPECT_EQ(a.norm, nn::NormKind::kRMSNorm);
  EXPECT_EQ(a.head_dim(), 64);
  EXPECT_EQ(a.attn_width(), 4 * 64);  // 4 heads of 64 on the default width 128
  EXPECT_EQ(a.family(), "qwen3");
  const nn::GptArchitecture off = architecture_from_options(
      parse(zs_train_flags(), {"--family", "qwen3", "--qk-norm", "off"}), kZsTrain);
  EXPECT_FALSE(off.qk_norm);
  EXPECT_EQ(off.family(), "llama");
  EXPECT_EQ(off.head_dim_override, 0);
}

TEST(ModelOptions, RopeScaling) {
  nn::GptArchitecture a = architecture_from_options(
      parse(zs_train_flags(),
            {"--family", "llama", "--rope-scaling", "llama3:factor=32,low=1,high=4,original=8192"}),
      kZsTrain);
  const nn::RopeScaling want = {nn::RopeScalingKind::kLlama3, 32.0, 1.0, 4.0, 8192};
  EXPECT_EQ(a.rope_scaling, want);
  EXPECT_TRUE(component_options_given(parse(zs_train_flags(), {"--rope-scaling", "none"})));
  a = architecture_from_options(
      parse(zs_train_flags(), {"--positions", "rotary", "--rope-scaling", "linear:factor=4"}),
      kZsTrain);
  EXPECT_EQ(a.rope_scaling.kind, nn::RopeScalingKind::kLinear);
  EXPECT_EQ(a.rope_scaling.factor, 4.0);
  EXPECT_EQ(refusal({"--rope-scaling", "linear:factor=4"}),
            "--rope-scaling applies to rotary positions (--positions rotary or --family llama), "
            "not learned ones");
  EXPECT_EQ(refusal({"--family", "llama", "--rope-scaling", "yarn:factor=4"}),
            "--rope-scaling 'yarn:factor=4': rope scaling: 'yarn:factor=4' is not one of none, "
            "linear:factor=F, llama3:factor=F,low=L,high=H,original=N");
  EXPECT_EQ(refusal({"--family", "llama", "--rope-scaling", "llama3:factor=8"}),
            "--rope-scaling 'llama3:factor=8': rope scaling: 'llama3:factor=8' lacks low= (llama3 "
            "needs factor=..., low=..., high=..., original=...)");
}

}  // namespace
}  // namespace zs::apps
