// The model description the trainer stores in checkpoints (apps/zs_train/model_description.h):
// every component is in it, and a checkpoint written before the components were described (only
// the dimensions) is expected as GPT-2: it resumes as GPT-2, and another architecture's resume is
// refused at the first component that differs.
#include <gtest/gtest.h>

#include <string>

#include "model_description.h"

namespace zs::train {
namespace {

// A checkpoint's description before issue 27: the dimensions of the trainer's default GPT-2.
const char* kOldGpt2 =
    R"({"context":128,"ffn_mult":4,"heads":4,"layers":4,"model":"gpt","vocab":256,"width":128})";

TrainOptions trainer_defaults() {
  TrainOptions o;
  o.model.arch = {.layers = 4, .heads = 4, .width = 128, .context = 128, .vocab = 256};
  return o;
}

TEST(ModelDescription, HoldsEveryComponent) {
  TrainOptions o = trainer_defaults();
  o.model.arch.norm = nn::NormKind::kRMSNorm;
  o.model.arch.positions = nn::PositionKind::kRotary;
  o.model.arch.mlp = nn::MlpKind::kSwiGLU;
  o.model.arch.kv_heads = 2;
  o.model.arch.ffn = 344;
  o.model.arch.qkv_bias = o.model.arch.proj_bias = o.model.arch.mlp_bias = false;
  EXPECT_EQ(model_description(o),
            R"({"context":128,"ffn":344,"ffn_mult":4,"heads":4,"kv_heads":2,"layers":4,)"
            R"("mlp":"swiglu","mlp_bias":false,"model":"gpt","norm":"rmsnorm","norm_eps":1e-05,)"
            R"("positions":"rotary","proj_bias":false,"qkv_bias":false,"rope_theta":10000.0,)"
            R"("vocab":256,"width":128})");
}

TEST(ModelDescription, NewCheckpointsAreComparedWhole) {
  const std::string now = model_description(trainer_defaults());
  EXPECT_EQ(description_to_expect(now, now), now);
  EXPECT_EQ(description_to_expect("{}", now), now);  // no dimensions either: not an old GPT-2
}

TEST(ModelDescription, OldCheckpointsResumeAsGpt2) {
  // The GPT-2 the trainer builds by default expects exactly the old description.
  EXPECT_EQ(description_to_expect(kOldGpt2, model_description(trainer_defaults())), kOldGpt2);
}

TEST(ModelDescription, OldCheckpointsRefuseAnotherArchitectureByField) {
  TrainOptions o = trainer_defaults();
  o.model.arch.kv_heads = 2;
  EXPECT_EQ(description_to_expect(kOldGpt2, model_description(o)),
            R"({"context":128,"ffn_mult":4,"heads":4,"kv_heads":2,"layers":4,"model":"gpt",)"
            R"("vocab":256,"width":128})");
  o = trainer_defaults();
  o.model.arch.norm = nn::NormKind::kRMSNorm;
  o.model.arch.ffn = 512;  // 4 x 128: GPT-2's, so absent
  EXPECT_EQ(description_to_expect(kOldGpt2, model_description(o)),
            R"({"context":128,"ffn_mult":4,"heads":4,"layers":4,"model":"gpt","norm":"rmsnorm",)"
            R"("vocab":256,"width":128})");
}

// Rope scaling is described when on (absent otherwise, as before it existed), read back, and a
// resume with another scaling is refused naming --rope-scaling.
TEST(ModelDescription, RopeScaling) {
  TrainOptions o = trainer_defaults();
  o.model.arch.norm = nn::NormKind::kRMSNorm;
  o.model.arch.positions = nn::PositionKind::kRotary;
  o.model.arch.mlp = nn::MlpKind::kSwiGLU;
  o.model.arch.qkv_bias = o.model.arch.proj_bias = o.model.arch.mlp_bias = false;
  const std::string plain = model_description(o);
  EXPECT_EQ(plain.find("rope_scaling"), std::string::npos) << plain;
  o.model.arch.rope_scaling = {nn::RopeScalingKind::kLlama3, 32.0, 1.0, 4.0, 8192};
  const std::string scaled = model_description(o);
  EXPECT_NE(scaled.find(R"("rope_scaling":"llama3:factor=32,low=1,high=4,original=8192")"),
            std::string::npos)
      << scaled;
  EXPECT_EQ(architecture_from_description(scaled, "x").rope_scaling, o.model.arch.rope_scaling);
  EXPECT_EQ(describe_model_change(plain, description_to_expect(plain, scaled)),
            "--rope-scaling llama3:factor=32,low=1,high=4,original=8192 in this run, none in the "
            "checkpoint");
  TrainOptions lin = o;
  lin.model.arch.rope_scaling = {nn::RopeScalingKind::kLinear, 4.0};
  EXPECT_EQ(describe_model_change(scaled, description_to_expect(scaled, model_description(lin))),
            "--rope-scaling linear:factor=4 in this run, llama3:factor=32,low=1,high=4,"
            "original=8192 in the checkpoint");
}

}  // namespace
}  // namespace zs::train
