// The GPT as Hugging Face's GPT-2 (interop/gpt_hf.h), at 1 and 2 ranks (ZeRO-3: each rank reads its
// own ranges, the transposed tensors included): an export imports back to the same master
// weights bit for bit (fp32) or to their bf16 rounding; the file holds HF's names and layouts and
// config.json HF's fields; tied embeddings are one parameter; a missing tensor, a wrong shape,
// a non-finite value, an unknown tensor and each config mismatch are refused on every rank with
// the tensor or field named, and leave the engine as it was (a non-finite value: when found in the
// first unit; after units were applied the parameters are unspecified). The logits against
// transformers itself are checked by tests/apps/hf_interop.py.
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_format.h"
#include "collectives/mpi_communicator.h"
#include "core/convert.h"
#include "core/error.h"
#include "interop/gpt_hf.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_specs.h"
#include "runtime/engine.h"
#include "tests/interop/hf_test_util.h"

namespace zs::nn {
namespace {

// The block layout of the default (GPT-2) architecture.
const GptBlockLayout kGpt2Block = GptBlockLayout::of(GptArchitecture{});

namespace fs = std::filesystem;
using nlohmann::json;

GptConfig small_config() {
  GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 2;
  c.arch.width = 32;
  c.arch.context = 16;
  c.run.batch = 2;
  c.run.threads = 1;
  return c;
}

// A GPT-2 form model of small_config().
struct GptRig : Rig {
  explicit GptRig(uint64_t seed) : Rig(seed, small_config()) {}
};

TEST(GptHf, ExportImportIsExact) {
  TempDir dir;
  GptRig a(1), b(2);
  export_gpt_hf(*a.engine, world(), a.config, dir / "hf");
  const GptHfImport r = import_gpt_hf(*b.engine, world(), b.config, dir / "hf");
  EXPECT_TRUE(r.ignored.empty());
  EXPECT_FALSE(r.config.tied);
  EXPECT_EQ(a.masters(), b.masters());
  EXPECT_EQ(a.engine->param_hash(), b.engine->param_hash());
}

TEST(GptHf, Bf16ExportImportsItsRounding) {
  TempDir dir;
  GptRig a(1), b(2);
  export_gpt_hf(*a.engine, world(), a.config, dir / "hf", DType::kBF16);
  import_gpt_hf(*b.engine, world(), b.config, dir / "hf");
  EXPECT_EQ(bf16_rounded(a.masters()), b.masters());
}

TEST(GptHf, FileHoldsHfNamesLayoutsAndConfig) {
  TempDir dir;
  GptRig a(1);
  export_gpt_hf(*a.engine, world(), a.config, dir / "hf");
  const auto m = a.masters();
  Tensors ts = read_f32(dir / "hf/model.safetensors");
  const int64_t C = 32, F = 128, L = 2;
  EXPECT_EQ(ts.size(), static_cast<size_t>(2 + 12 * L + 3));
  // (name, our unit, our param index, transposed)
  struct Want {
    std::string name;
    size_t unit, param;
    bool transposed;
  };
  const std::vector<Want> wants = {
      {"transformer.wte.weight", 0, 0, false},
      {"transformer.wpe.weight", 0, 1, false},
      {"transformer.h.1.ln_1.bias", 2, static_cast<size_t>(kGpt2Block.ln1_b), false},
      {"transformer.h.0.attn.c_attn.weight", 1, static_cast<size_t>(kGpt2Block.qkv_w), true},
      {"transformer.h.1.attn.c_attn.bias", 2, static_cast<size_t>(kGpt2Block.qkv_b), false},
      {"transformer.h.1.attn.c_proj.weight", 2, static_cast<size_t>(kGpt2Block.proj_w), true},
      {"transformer.h.0.ln_2.weight", 1, static_cast<size_t>(kGpt2Block.ln2_w), false},
      {"transformer.h.0.mlp.c_fc.weight", 1, static_cast<size_t>(kGpt2Block.fc_w), true},
      {"transformer.h.1.mlp.c_proj.weight", 2, static_cast<size_t>(kGpt2Block.fc_proj_w), true},
      {"transformer.h.1.mlp.c_proj.bias", 2, static_cast<size_t>(kGpt2Block.fc_proj_b), false},
      {"transformer.ln_f.weight", 3, 0, false},
      {"lm_head.weight", 3, 2, false},
  };
  for (const Want& w : wants) {
    const Tensor* t = find(ts, w.name);
    ASSERT_NE(t, nullptr) << w.name;
    const ParamSpec& s = a.engine->param_specs(w.unit)[w.param];
    const std::vector<float>& ours = m[w.unit][w.param];
    if (!w.transposed) {
      EXPECT_EQ(t->shape, s.shape) << w.name;
      EXPECT_EQ(t->data, ours) << w.name;
      continue;
    }
    ASSERT_EQ(t->shape, (std::vector<int64_t>{s.shape[1], s.shape[0]})) << w.name;
    for (int64_t r = 0; r < s.shape[0]; ++r) {
      for (int64_t c = 0; c < s.shape[1]; ++c)
        ASSERT_EQ(t->data[c * s.shape[0] + r], ours[r * s.shape[1] + c]) << w.name;
    }
  }
  EXPECT_EQ(find(ts, "transformer.h.0.attn.c_attn.weight")->shape,
            (std::vector<int64_t>{C, 3 * C}));
  EXPECT_EQ(find(ts, "transformer.h.0.mlp.c_fc.weight")->shape, (std::vector<int64_t>{C, F}));
  std::ifstream in(dir / "hf/config.json");
  const json c = json::parse(in);
  EXPECT_EQ(c.at("model_type"), "gpt2");
  EXPECT_EQ(c.at("architectures"), json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(c.at("n_layer"), 2);
  EXPECT_EQ(c.at("n_head"), 2);
  EXPECT_EQ(c.at("n_embd"), 32);
  EXPECT_EQ(c.at("n_positions"), 16);
  EXPECT_EQ(c.at("n_inner"), 128);
  EXPECT_EQ(c.at("vocab_size"), 256);
  EXPECT_EQ(c.at("activation_function"), "gelu_new");
  EXPECT_EQ(c.at("layer_norm_epsilon"), 1e-5);
  EXPECT_EQ(c.at("tie_word_embeddings"), false);
  EXPECT_EQ(c.at("torch_dtype"), "float32");
}

// Tied embeddings (GPT-2's default) are one parameter ([Note: tied parameters]): a tied model
// exports without lm_head.weight; a directory without the key (HF's default: tied) imports
// exactly; a stored lm_head.weight is skipped, as HF's model skips it; an untied model refuses a
// tied directory naming the field.
TEST(GptHf, TiedEmbeddingsAreOneParameter) {
  TempDir dir;
  GptConfig tc = small_config();
  tc.arch.tied_embeddings = true;
  Rig a(1, tc), b(2, tc);
  export_gpt_hf(*a.engine, world(), tc, dir / "hf");
  if (world().rank() == 0) {
    for (const Tensor& t : read_f32(dir / "hf/model.safetensors"))
      EXPECT_NE(t.name, "lm_head.weight");
  }
  variant(
      dir / "hf", dir / "tied",
      [](Tensors& ts) {
        ts.push_back({"transformer.h.0.attn.bias", {1, 1, 16, 16}, std::vector<float>(256, 1.0f)});
      },
      [](json& c) {
        EXPECT_EQ(c.at("tie_word_embeddings"), true);
        c.erase("tie_word_embeddings");  // HF's default for GPT-2: tied
      });
  const GptHfImport r = import_gpt_hf(*b.engine, world(), tc, dir / "tied");
  EXPECT_TRUE(r.config.tied);
  EXPECT_EQ(r.ignored, std::vector<std::string>{"transformer.h.0.attn.bias"});
  EXPECT_EQ(b.masters(), a.masters());
  // Tied with an lm_head.weight stored too: HF's model uses wte, and so do we.
  variant(dir / "hf", dir / "tied2", [](Tensors& ts) {
    ts.push_back({"lm_head.weight", {256, 32}, std::vector<float>(256 * 32, 0.25f)});
  });
  Rig d(3, tc);
  const GptHfImport r2 = import_gpt_hf(*d.engine, world(), tc, dir / "tied2");
  EXPECT_EQ(r2.ignored, std::vector<std::string>{"lm_head.weight"});
  EXPECT_EQ(d.masters(), a.masters());
  GptRig u(4);  // untied
  const std::string msg =
      error_of([&] { import_gpt_hf(*u.engine, world(), u.config, dir / "tied"); });
  EXPECT_NE(msg.find("\"tie_word_embeddings\" is 1, the model's tied embeddings (0/1) is 0"),
            std::string::npos)
      << msg;
}

TEST(GptHf, BadInputsAreRefusedWithTheNameAndChangeNothing) {
  TempDir dir;
  GptRig a(1), b(2);
  export_gpt_hf(*a.engine, world(), a.config, dir / "hf");
  auto before = b.masters();
  // `unchanged`: refused before any unit was applied. A non-finite value in a later unit leaves
  // the parameters unspecified (units before it applied: [Note: streaming import]).
  auto expect_refused = [&](const std::string& name, const std::string& needle,
                            bool unchanged = true) {
    const std::string msg =
        error_of([&] { import_gpt_hf(*b.engine, world(), b.config, dir / name); });
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
    if (unchanged) EXPECT_EQ(b.masters(), before) << name;
    before = b.masters();
  };
  variant(dir / "hf", dir / "missing", [](Tensors& ts) {
    std::erase_if(ts, [](const Tensor& t) { return t.name == "transformer.h.1.mlp.c_fc.bias"; });
  });
  expect_refused("missing", "tensor \"transformer.h.1.mlp.c_fc.bias\" is missing");
  variant(dir / "hf", dir / "shape", [](Tensors& ts) {
    find(ts, "transformer.h.0.attn.c_attn.weight")->shape = {96, 32};  // ours, not transposed
  });
  expect_refused(
      "shape",
      "tensor \"transformer.h.0.attn.c_attn.weight\" has shape [96, 32], the model needs "
      "[32, 96] (the transpose of block.0.qkv.weight)");
  variant(dir / "hf", dir / "nan", [](Tensors& ts) {
    find(ts, "transformer.h.1.attn.c_proj.weight")->data[37] = std::nanf("");
  });
  expect_refused(
      "nan",
      "tensor \"transformer.h.1.attn.c_proj.weight\" holds a non-finite value (nan) at element 37",
      false);
  variant(dir / "hf", dir / "inf", [](Tensors& ts) {
    find(ts, "transformer.wpe.weight")->data[5] = std::numeric_limits<float>::infinity();
  });
  expect_refused("inf",
                 "tensor \"transformer.wpe.weight\" holds a non-finite value (inf) at element 5");
  variant(dir / "hf", dir / "extra", [](Tensors& ts) {
    ts.push_back({"transformer.h.2.ln_1.weight", {32}, std::vector<float>(32, 1.0f)});
  });
  expect_refused("extra",
                 "1 tensor(s) the model does not have, e.g. \"transformer.h.2.ln_1.weight\"");
  const std::vector<std::pair<std::function<void(json&)>, std::string>> configs = {
      {[](json& c) { c["n_layer"] = 3; }, "\"n_layer\" is 3, the model's layers is 2"},
      {[](json& c) { c["n_head"] = 4; }, "\"n_head\" is 4, the model's heads is 2"},
      {[](json& c) { c["n_positions"] = 1024; },
       "\"n_positions\" is 1024, the model's context is 16"},
      {[](json& c) { c["vocab_size"] = 50257; },
       "\"vocab_size\" is 50257, the model's vocab is 256"},
      {[](json& c) { c["n_inner"] = 64; }, "\"n_inner\" is 64, the model's ffn width is 128"},
      {[](json& c) { c["activation_function"] = "gelu"; }, "\"activation_function\" is \"gelu\""},
      {[](json& c) { c["layer_norm_epsilon"] = 1e-6; }, "\"layer_norm_epsilon\" is 1e-06"},
      {[](json& c) { c["model_type"] = "llama"; }, "\"model_type\" is \"llama\""},
      {[](json& c) { c.erase("n_embd"); }, "\"n_embd\" is missing"},
      {[](json& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
       "\"scale_attn_by_inverse_layer_idx\" is true"},
  };
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string name = "config" + std::to_string(i);
    variant(
        dir / "hf", dir / name, [](Tensors&) {}, configs[i].first);
    expect_refused(name, "config.json: " + configs[i].second);
  }
  if (world().rank() == 0) {
    fs::create_directories(dir / "noweights");
    fs::copy_file(dir / "hf/config.json", dir / "noweights/config.json");
    fs::create_directories(dir / "noconfig");
  }
  world().barrier();
  expect_refused("noweights", "safe_serialization=True");
  expect_refused("noconfig", "config.json");
}

TEST(GptHf, MappingNamesEveryParameterOnce) {
  const GptConfig c = small_config();
  std::set<std::string> names;
  for (size_t u = 0; u < static_cast<size_t>(c.arch.layers) + 2; ++u) {
    for (const ParamSpec& p : gpt_unit_specs(c, u))
      EXPECT_TRUE(names.insert(gpt_hf_tensor_name(gpt_unit_name(c, u), p).name).second);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(2 + 12 * c.arch.layers + 3));
  ParamSpec p;
  p.name = "qkv.weight";
  EXPECT_NE(error_of([&] { gpt_hf_tensor_name("blocks.0", p); }).find("blocks.0.qkv.weight"),
            std::string::npos);
  EXPECT_EQ(gpt_hf_tensor_name("head", gpt_head_specs(c)[2], true).name, "transformer.wte.weight");
  EXPECT_TRUE(gpt_hf_ignorable("transformer.h.11.attn.masked_bias"));
  EXPECT_FALSE(gpt_hf_ignorable("transformer.h.11.attn.c_attn.bias"));
  EXPECT_FALSE(gpt_hf_ignorable("lm_head.weight"));
  // config.json round trip.
  const HfConfig back = parse_hf_config(hf_config_json(c.arch), "x");
  EXPECT_EQ(back.arch, c.arch);
  EXPECT_NO_THROW(check_hf_config(back, c.arch, "x"));
  EXPECT_FALSE(back.tied);
  EXPECT_NE(error_of([] { parse_hf_config("{", "cfg"); }).find("cfg: not a JSON object"),
            std::string::npos);
}

}  // namespace
}  // namespace zs::nn
