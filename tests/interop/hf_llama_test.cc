// The Llama family as Hugging Face directories (interop/gpt_hf.h, hf_names.h), at 1 and 2 ranks
// (ZeRO-3: each rank reads the rows of each q/k/v and gate/up piece its shard covers): an export
// imports back to the same master weights bit for bit, for Llama (with and without biases) and
// Qwen2 (q/k/v biases); the file holds HF's names with q|k|v and gate|up as row ranges of our
// fused weights; a sharded model.safetensors.index.json imports the same; a tensor missing from
// every file, a wrong shape and a tensor in two files are refused naming them; tied embeddings are
// one parameter; Qwen3 (q_norm/k_norm, 4 heads of 12 on a width of 32, tied) exports and imports
// exactly under its names. The logits against transformers itself: tests/apps/hf_llama.py and
// tests/interop/hf_parity.py.
#include <mpi.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "interop/gpt_hf.h"
#include "models/gpt/gpt_specs.h"
#include "tests/interop/hf_test_util.h"

namespace zs::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// C 32, 4 heads of 8, 2 KV heads (KV hd = 16), F 48, vocab 40.
GptConfig llama_config(bool qkv_bias = false, bool other_bias = false) {
  GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 4;
  c.arch.kv_heads = 2;
  c.arch.width = 32;
  c.arch.ffn = 48;
  c.arch.vocab = 40;
  c.arch.context = 16;
  c.arch.norm = NormKind::kRMSNorm;
  c.arch.norm_eps = 1e-6f;
  c.arch.positions = PositionKind::kRotary;
  c.arch.rope_theta = 500000.0f;
  c.arch.mlp = MlpKind::kSwiGLU;
  c.arch.qkv_bias = qkv_bias;
  c.arch.proj_bias = c.arch.mlp_bias = other_bias;
  c.run.batch = 2;
  c.run.threads = 1;
  return c;
}

// Rows [r0, r0 + n) of a row-major [*, cols] parameter.
std::vector<float> rows(const std::vector<float>& v, int64_t cols, int64_t r0, int64_t n) {
  return {v.begin() + r0 * cols, v.begin() + (r0 + n) * cols};
}

TEST(HfLlama, ExportImportIsExactForEachForm) {
  const GptConfig forms[] = {llama_config(), llama_config(true), llama_config(true, true)};
  for (const GptConfig& c : forms) {
    TempDir dir;
    Rig a(1, c), b(2, c);
    export_gpt_hf(*a.engine, world(), c, dir / "hf");
    const GptHfImport r = import_gpt_hf(*b.engine, world(), c, dir / "hf");
    EXPECT_EQ(r.config.family,
              c.arch.qkv_bias && !c.arch.proj_bias ? HfFamily::kQwen2 : HfFamily::kLlama);
    EXPECT_FALSE(r.config.tied);
    EXPECT_TRUE(r.ignored.empty());
    EXPECT_EQ(r.shards, 1);
    EXPECT_EQ(a.masters(), b.masters());
    EXPECT_EQ(a.engine->param_hash(), b.engine->param_hash());
  }
}

// Qwen3's form of llama_config(): per-head q/k norms, head_dim 12 (q 48 rows, k and v 24 each:
// heads x head_dim is not the width), tied.
GptConfig qwen3_config() {
  GptConfig c = llama_config();
  c.arch.qk_norm = true;
  c.arch.head_dim_override = 12;
  c.arch.tied_embeddings = true;
  return c;
}

TEST(HfLlama, Qwen3ExportImportIsExactUnderItsNames) {
  TempDir dir;
  const GptConfig c = qwen3_config();
  Rig a(1, c), b(2, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  const GptHfImport r = import_gpt_hf(*b.engine, world(), c, dir / "hf");
  EXPECT_EQ(r.config.family, HfFamily::kQwen3);
  EXPECT_TRUE(r.config.tied);
  EXPECT_EQ(a.masters(), b.masters());
  EXPECT_EQ(a.engine->param_hash(), b.engine->param_hash());
  const auto m = a.masters();
  Tensors ts = read_f32(dir / "hf/model.safetensors");
  EXPECT_EQ(ts.size(), static_cast<size_t>(1 + 2 * 11 + 1));  // 11 per layer, tied: no lm_head
  const GptBlockLayout bl = GptBlockLayout::of(c.arch);
  const int64_t C = 32, D = 48, KV = 24;
  const auto& qkv = m[1][bl.qkv_w];
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.q_proj.weight")->shape,
            (std::vector<int64_t>{D, C}));
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.q_proj.weight")->data, rows(qkv, C, 0, D));
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.k_proj.weight")->data, rows(qkv, C, D, KV));
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.v_proj.weight")->data, rows(qkv, C, D + KV, KV));
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.o_proj.weight")->shape,
            (std::vector<int64_t>{C, D}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.q_norm.weight")->shape, (std::vector<int64_t>{12}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.q_norm.weight")->data, m[2][bl.q_norm_w]);
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.k_norm.weight")->data, m[2][bl.k_norm_w]);
  EXPECT_EQ(find(ts, "lm_head.weight"), nullptr);
  std::ifstream in(dir / "hf/config.json");
  const json j = json::parse(in);
  EXPECT_EQ(j.at("architectures"), json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(j.at("model_type"), "qwen3");
  EXPECT_EQ(j.at("head_dim"), 12);
  EXPECT_EQ(j.at("attention_bias"), false);
  EXPECT_EQ(j.at("tie_word_embeddings"), true);
}

TEST(HfLlama, Bf16ExportImportsItsRounding) {
  TempDir dir;
  const GptConfig c = llama_config(true);
  Rig a(1, c), b(2, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf", DType::kBF16);
  import_gpt_hf(*b.engine, world(), c, dir / "hf");
  EXPECT_EQ(bf16_rounded(a.masters()), b.masters());
}

TEST(HfLlama, FileHoldsHfNamesAndRowRanges) {
  TempDir dir;
  const GptConfig c = llama_config(true, true);
  Rig a(1, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  const auto m = a.masters();
  Tensors ts = read_f32(dir / "hf/model.safetensors");
  const int64_t C = 32, KV = 16, F = 48;
  EXPECT_EQ(ts.size(), static_cast<size_t>(1 + 2 * (2 + 2 * 7) + 2));  // 7 weights, 7 biases
  const GptBlockLayout bl = GptBlockLayout::of(c.arch);
  const auto& qkv = m[2][bl.qkv_w];
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.q_proj.weight")->data, rows(qkv, C, 0, C));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{KV, C}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.k_proj.weight")->data, rows(qkv, C, C, KV));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.v_proj.weight")->data, rows(qkv, C, C + KV, KV));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.v_proj.bias")->data,
            rows(m[2][bl.qkv_b], 1, C + KV, KV));
  EXPECT_EQ(find(ts, "model.layers.0.mlp.gate_proj.weight")->data, rows(m[1][bl.fc_w], C, 0, F));
  EXPECT_EQ(find(ts, "model.layers.0.mlp.up_proj.weight")->data, rows(m[1][bl.fc_w], C, F, F));
  EXPECT_EQ(find(ts, "model.layers.0.mlp.up_proj.bias")->data, rows(m[1][bl.fc_b], 1, F, F));
  EXPECT_EQ(find(ts, "model.layers.0.mlp.down_proj.weight")->shape, (std::vector<int64_t>{C, F}));
  EXPECT_EQ(find(ts, "model.layers.0.self_attn.o_proj.bias")->data, m[1][bl.proj_b]);
  EXPECT_EQ(find(ts, "model.layers.0.input_layernorm.weight")->data, m[1][bl.ln1_w]);
  EXPECT_EQ(find(ts, "model.layers.0.post_attention_layernorm.weight")->data, m[1][bl.ln2_w]);
  EXPECT_EQ(find(ts, "model.embed_tokens.weight")->data, m[0][0]);
  EXPECT_EQ(find(ts, "model.norm.weight")->data, m[3][0]);
  EXPECT_EQ(find(ts, "lm_head.weight")->data, m[3][1]);
  std::ifstream in(dir / "hf/config.json");
  const json j = json::parse(in);
  EXPECT_EQ(j.at("architectures"), json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j.at("num_key_value_heads"), 2);
  EXPECT_EQ(j.at("intermediate_size"), 48);
  EXPECT_EQ(j.at("max_position_embeddings"), 16);
  EXPECT_EQ(j.at("attention_bias"), true);
  EXPECT_EQ(j.at("mlp_bias"), true);
  EXPECT_EQ(j.at("rope_theta"), 500000.0);
  EXPECT_EQ(j.at("tie_word_embeddings"), false);
}

// Rank 0 splits dir/hf/model.safetensors into two shard files and an index of them (as
// save_pretrained(max_shard_size=...) writes), dropping `drop` from every file; then a barrier.
void shard(const TempDir& dir, const std::string& to, const std::string& drop = "") {
  if (world().rank() == 0) {
    fs::create_directories(dir / to);
    Tensors ts = read_f32(dir / "hf/model.safetensors");
    std::erase_if(ts, [&](const Tensor& t) { return t.name == drop; });
    const size_t half = ts.size() / 2;
    const Tensors first(ts.begin(), ts.begin() + half), second(ts.begin() + half, ts.end());
    const char* names[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    write_f32(dir / (to + "/" + names[0]), first);
    write_f32(dir / (to + "/" + names[1]), second);
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    for (size_t i = 0; i < ts.size(); ++i) index["weight_map"][ts[i].name] = names[i >= half];
    std::ofstream(dir / (to + "/model.safetensors.index.json")) << index.dump(2);
    fs::copy_file(dir / "hf/config.json", dir / (to + "/config.json"));
  }
  world().barrier();
}

TEST(HfLlama, ShardedIndexImportsTheSame) {
  TempDir dir;
  const GptConfig c = llama_config(true);
  Rig a(1, c), b(2, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  shard(dir, "sharded");
  const GptHfImport r = import_gpt_hf(*b.engine, world(), c, dir / "sharded");
  EXPECT_EQ(r.shards, 2);
  EXPECT_EQ(a.masters(), b.masters());
  // A tensor in no file: named, and nothing changed.
  Rig d(3, c);
  const auto before = d.masters();
  shard(dir, "missing", "model.layers.1.self_attn.k_proj.weight");
  const std::string msg = error_of([&] { import_gpt_hf(*d.engine, world(), c, dir / "missing"); });
  EXPECT_NE(msg.find("missing/model.safetensors.index.json: tensor "
                     "\"model.layers.1.self_attn.k_proj.weight\" is missing"),
            std::string::npos)
      << msg;
  EXPECT_EQ(d.masters(), before);
  // A tensor in two files.
  if (world().rank() == 0) {
    Tensors ts = read_f32(dir / "sharded/model-00001-of-00002.safetensors");
    ts.push_back(read_f32(dir / "sharded/model-00002-of-00002.safetensors").back());
    write_f32(dir / "sharded/model-00001-of-00002.safetensors", ts);
  }
  world().barrier();
  EXPECT_NE(
      error_of([&] { import_gpt_hf(*d.engine, world(), c, dir / "sharded"); }).find("is in both"),
      std::string::npos);
}

TEST(HfLlama, BadInputsAreRefusedWithTheName) {
  TempDir dir;
  const GptConfig c = llama_config();
  Rig a(1, c), b(2, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  auto before = b.masters();
  // `unchanged`: refused before any unit was applied. A non-finite value in a later unit leaves
  // the parameters unspecified (units before it applied: [Note: streaming import]).
  auto expect_refused = [&](const std::string& name, const std::string& needle,
                            bool unchanged = true) {
    const std::string msg = error_of([&] { import_gpt_hf(*b.engine, world(), c, dir / name); });
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
    if (unchanged) EXPECT_EQ(b.masters(), before) << name;
    before = b.masters();
  };
  variant(dir / "hf", dir / "missing", [](Tensors& ts) {
    std::erase_if(ts,
                  [](const Tensor& t) { return t.name == "model.layers.0.mlp.up_proj.weight"; });
  });
  expect_refused("missing", "tensor \"model.layers.0.mlp.up_proj.weight\" is missing");
  variant(dir / "hf", dir / "shape", [](Tensors& ts) {
    find(ts, "model.layers.1.self_attn.v_proj.weight")->shape = {32, 16};
  });
  expect_refused("shape",
                 "tensor \"model.layers.1.self_attn.v_proj.weight\" has shape [32, 16], the model "
                 "needs [16, 32]");
  variant(dir / "hf", dir / "nan", [](Tensors& ts) {
    find(ts, "model.layers.1.self_attn.k_proj.weight")->data[300] = std::nanf("");
  });
  expect_refused("nan",
                 "tensor \"model.layers.1.self_attn.k_proj.weight\" holds a non-finite value (nan) "
                 "at element 300",
                 false);
  variant(
      dir / "hf", dir / "heads", [](Tensors&) {}, [](json& j) { j["num_key_value_heads"] = 4; });
  expect_refused("heads", "\"num_key_value_heads\" is 4, the model's kv heads is 2");
  variant(
      dir / "hf", dir / "bias", [](Tensors&) {}, [](json& j) { j["attention_bias"] = true; });
  expect_refused("bias", "\"model_type\" is \"llama\"");
}

// Tied embeddings are one parameter ([Note: tied parameters]): exported without lm_head.weight
// and with tie_word_embeddings true, imported exactly; a stored lm_head.weight is skipped; an
// untied model refuses a tied directory (and the other way round) naming the field.
TEST(HfLlama, TiedEmbeddingsAreOneParameter) {
  TempDir dir;
  GptConfig c = llama_config();
  c.arch.tied_embeddings = true;
  Rig a(1, c), b(2, c);
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  const GptHfImport r = import_gpt_hf(*b.engine, world(), c, dir / "hf");
  EXPECT_TRUE(r.config.tied);
  EXPECT_TRUE(r.ignored.empty());  // no lm_head.weight written
  EXPECT_EQ(a.masters(), b.masters());
  EXPECT_EQ(a.engine->param_hash(), b.engine->param_hash());
  // As an older save_pretrained wrote it: lm_head.weight stored beside the embedding, an old
  // rotary buffer.
  variant(
      dir / "hf", dir / "stored",
      [](Tensors& ts) {
        std::vector<float> v(40 * 32, 0.5f);
        ts.push_back({"lm_head.weight", {40, 32}, v});
        ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, {1, 2, 3, 4}});
      },
      [](json&) {});
  Rig d(3, c);
  const GptHfImport s = import_gpt_hf(*d.engine, world(), c, dir / "stored");
  EXPECT_EQ(s.ignored, (std::vector<std::string>{"lm_head.weight",
                                                 "model.layers.0.self_attn.rotary_emb.inv_freq"}));
  EXPECT_EQ(d.masters(), a.masters());
  GptConfig untied = c;
  untied.arch.tied_embeddings = false;
  Rig u(4, untied);
  const std::string msg = error_of([&] { import_gpt_hf(*u.engine, world(), untied, dir / "hf"); });
  EXPECT_NE(msg.find("\"tie_word_embeddings\" is 1, the model's tied embeddings (0/1) is 0"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zs::nn
