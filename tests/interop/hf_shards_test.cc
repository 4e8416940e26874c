// Hugging Face's sharded layout (checkpoint/safetensors_shards.h, interop/gpt_hf.h) and the
// streaming import, at 1 and 2 ranks: the shard plan is save_pretrained's (greedy in order, a
// tensor larger than the limit alone), the index is transformers' text to the byte, a size is
// parsed as max_shard_size and a bad one refused naming the flag; a sharded export imports back
// bit for bit and an export over another layout leaves only its own files; a frozen int8 base
// read by row ranges equals the one encoded from whole tensors (frozen_hash); a shard missing,
// truncated or a tensor in two files is refused naming the file, the engine unchanged.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_shards.h"
#include "core/error.h"
#include "interop/gpt_hf.h"
#include "models/gpt/gpt.h"
#include "runtime/engine.h"
#include "tests/interop/hf_test_util.h"

namespace zs::nn {
namespace {

using safetensors::parse_byte_size;
using safetensors::plan_shards;
using safetensors::ShardPlan;

TEST(ShardPlan, GreedyInOrderAndAnOversizedTensorAlone) {
  // Limit 100: 40+50; 30 would make 120: new file; 30+60; 150 alone; 10+90 = 100 (not over); 0.
  const std::vector<int64_t> sizes = {40, 50, 30, 60, 150, 10, 90, 0};
  const ShardPlan p = plan_shards(sizes, 100);
  EXPECT_EQ(p.shard_of, (std::vector<int>{0, 0, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(p.shard_bytes, (std::vector<int64_t>{90, 90, 150, 100}));
  // An oversized first tensor: alone in the first file, no empty file before it.
  const ShardPlan q = plan_shards(std::vector<int64_t>{150, 10}, 100);
  EXPECT_EQ(q.shard_of, (std::vector<int>{0, 1}));
  EXPECT_EQ(q.shard_bytes, (std::vector<int64_t>{150, 10}));
  EXPECT_EQ(plan_shards(std::vector<int64_t>{}, 100).count(), 1);
  EXPECT_EQ(plan_shards(sizes, 1000).count(), 1);
  EXPECT_THROW(plan_shards(sizes, 0), Error);
}

TEST(ShardPlan, FileNamesAndIndexAsTransformersWritesThem) {
  EXPECT_EQ(safetensors::shard_file_names("model.safetensors", 1),
            std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(safetensors::shard_file_names("model.safetensors", 3),
            (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(safetensors::shard_index_name("model.safetensors"), "model.safetensors.index.json");
  const std::vector<std::string> tensors = {"lm_head.weight", "b", "a.weight"};
  const std::vector<std::string> files = {"model-00002-of-00002.safetensors",
                                          "model-00001-of-00002.safetensors",
                                          "model-00001-of-00002.safetensors"};
  // json.dumps(index, indent=2, sort_keys=True) + "\n", as save_pretrained writes it.
  EXPECT_EQ(safetensors::shard_index_json(tensors, files, 1234),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 1234\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"a.weight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b\": \"model-00001-of-00002.safetensors\",\n"
            "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
  for (const char* yes :
       {"model.safetensors", "model.safetensors.index.json", "model-00002-of-00007.safetensors"})
    EXPECT_TRUE(safetensors::is_layout_file("model.safetensors", yes)) << yes;
  for (const char* no : {"config.json", "model-1-of-2.safetensors", "model-00002-of-00007.bin",
                         "adapter_model.safetensors", "model.safetensors.tmp",
                         "model-00002-of-00007.safetensors.tmp", "xmodel.safetensors"})
    EXPECT_FALSE(safetensors::is_layout_file("model.safetensors", no)) << no;
}

TEST(ShardSize, ParsedAsMaxShardSize) {
  const std::string flag = "--export-shard-size";
  EXPECT_EQ(parse_byte_size("5GB", flag), 5'000'000'000);
  EXPECT_EQ(parse_byte_size("500MB", flag), 500'000'000);
  EXPECT_EQ(parse_byte_size("100KB", flag), 100'000);
  EXPECT_EQ(parse_byte_size("2GiB", flag), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("3MiB", flag), int64_t{3} << 20);
  EXPECT_EQ(parse_byte_size("7kib", flag), 7 * 1024);
  EXPECT_EQ(parse_byte_size("5gB", flag), 5'000'000'000);
  EXPECT_EQ(parse_byte_size("123", flag), 123);
  EXPECT_EQ(parse_byte_size("64B", flag), 64);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a size"},
      {"GB", "not a size"},
      {"-5GB", "not a size"},
      {"1.5GB", "unknown unit"},
      {"5 GB", "unknown unit"},
      {"5TB", "unknown unit"},
      {"5Gb", "lowercase b"},
      {"5kb", "lowercase b"},
      {"64b", "lowercase b"},
      {"0", "at least 1 byte"},
      {"0GB", "at least 1 byte"},
      {"99999999999GB", "too large"},
      {"1234567890123456789012", "too large"}};
  for (const auto& [text, why] : bad) {
    try {
      parse_byte_size(text, flag);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(m.rfind("--export-shard-size ", 0), 0u) << m;
      EXPECT_NE(m.find(why), std::string::npos) << text << ": " << m;
    }
  }
}

GptConfig llama(int lora_rank = 0) {
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
  c.run.batch = 2;
  c.run.threads = 1;
  c.adapters.lora.rank = lora_rank;
  c.adapters.lora.alpha = 16.0f;
  c.adapters.lora.freeze_base = lora_rank > 0;
  return c;
}

// The directory's file names, sorted (rank 0's view, shared).
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& f : fs::directory_iterator(dir)) names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> with_config(std::vector<std::string> weights) {
  weights.push_back("config.json");
  std::sort(weights.begin(), weights.end());
  return weights;
}

// The whole content of a file.
std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A limit that splits the model into several files: the embedding [40, 32] fp32 is 5120 bytes.
constexpr int64_t kSmallShard = 6000;

TEST(HfShards, ShardedExportImportsExactlyAndReplacesAnotherLayout) {
  TempDir dir;
  const GptConfig c = llama();
  Rig a(1, c), b(2, c);
  const safetensors::ExportReport r =
      export_gpt_hf(*a.engine, world(), c, dir / "hf", DType::kF32, kSmallShard);
  ASSERT_GT(r.files, 2);
  const std::vector<std::string> shards =
      safetensors::shard_file_names("model.safetensors", r.files);
  EXPECT_EQ(listing(dir / "hf"), with_config([&] {
              auto v = shards;
              v.push_back("model.safetensors.index.json");
              return v;
            }()));
  // The index names every tensor of every shard, and total_size is their data.
  std::ifstream in(dir / "hf/model.safetensors.index.json");
  const json index = json::parse(in);
  int64_t data = 0;
  size_t tensors = 0;
  for (const std::string& s : shards) {
    const Tensors ts = read_f32(dir / ("hf/" + s));
    for (const Tensor& t : ts) {
      EXPECT_EQ(index["weight_map"].value(t.name, ""), s) << t.name;
      data += static_cast<int64_t>(4 * t.data.size());
    }
    tensors += ts.size();
    int64_t bytes = 0;
    for (const Tensor& t : ts) bytes += static_cast<int64_t>(4 * t.data.size());
    EXPECT_TRUE(bytes <= kSmallShard || ts.size() == 1) << s << ": " << bytes << " bytes";
  }
  EXPECT_EQ(index["weight_map"].size(), tensors);
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), data);
  EXPECT_EQ(r.data_bytes, data);
  const GptHfImport im = import_gpt_hf(*b.engine, world(), c, dir / "hf");
  EXPECT_EQ(im.shards, r.files);
  EXPECT_EQ(b.masters(), a.masters());

  // One file over the shards: the shards and the index are gone.
  export_gpt_hf(*a.engine, world(), c, dir / "hf");
  EXPECT_EQ(listing(dir / "hf"), with_config({"model.safetensors"}));
  // Shards over one file, then fewer shards over more: only the new export's files.
  export_gpt_hf(*a.engine, world(), c, dir / "hf", DType::kF32, kSmallShard);
  const safetensors::ExportReport fewer =
      export_gpt_hf(*a.engine, world(), c, dir / "hf", DType::kBF16, 3 * kSmallShard);
  ASSERT_GT(fewer.files, 1);
  ASSERT_LT(fewer.files, r.files);
  auto expect = safetensors::shard_file_names("model.safetensors", fewer.files);
  expect.push_back("model.safetensors.index.json");
  EXPECT_EQ(listing(dir / "hf"), with_config(expect));
  Rig d(3, c);
  import_gpt_hf(*d.engine, world(), c, dir / "hf");
  EXPECT_EQ(d.masters(), bf16_rounded(a.masters()));
}

// Engines of a LoRA model whose frozen base is stored in int8, ZeRO-3.
struct Int8Rig {
  explicit Int8Rig(GptConfig c) : model(c, &tracker) {
    EngineConfig e;
    e.stage = ZeroStage::k3;
    e.precision.param_dtype = DType::kF32;
    e.frozen.storage = DType::kI8;
    e.seed = 5;
    engine = std::make_unique<Engine>(model, world(), e, &tracker);
  }
  MemoryTracker tracker;
  GptModel model;
  std::unique_ptr<Engine> engine;
};

TEST(HfShards, Int8BaseReadByRowRangesEqualsWholeTensors) {
  TempDir dir;
  Rig src(7, llama());
  export_gpt_hf(*src.engine, world(), src.config, dir / "hf", DType::kF32, kSmallShard);
  Int8Rig streamed(llama(4)), whole(llama(4));
  import_gpt_hf(*streamed.engine, world(), llama(4), dir / "hf");
  // The import before streaming: every frozen parameter encoded from its whole values.
  int64_t partial = 0;
  for (size_t u = 0; u < whole.engine->num_units(); ++u) {
    for (size_t f = 0; f < whole.engine->frozen_specs(u).size(); ++f) {
      const std::vector<float> v = src.engine->gather_master_param(u, f);
      whole.engine->set_frozen_param(u, f, v.data());
      const ElementRange need = streamed.engine->frozen_param_needs(u, f);
      if (need.count() < whole.engine->frozen_specs(u)[f].numel()) ++partial;
    }
  }
  EXPECT_EQ(streamed.engine->frozen_hash(), whole.engine->frozen_hash());
  // At 2 ranks some parameter was read in part (a row range), at 1 none was.
  if (world().size() == 1) EXPECT_EQ(partial, 0);
  if (world().size() > 1) EXPECT_GT(partial, 0);
  // Each rank read exactly the rows whose int8 values it stores (the row scales are exchanged),
  // and some records have a row's scale on one rank and its values on another (so the exchange,
  // not a read, gave that rank the scale).
  int split = 0;
  const int world_size = world().size(), rank = world().rank();
  for (size_t u = 0; u < streamed.engine->num_units(); ++u) {
    const FrozenLayout& l = streamed.engine->frozen_layout(u);
    const int64_t shard = l.bytes.shard_numel;
    for (size_t f = 0; f < l.records.size(); ++f) {
      const FrozenRecord& r = l.records[f];
      if (r.dtype != DType::kI8) continue;
      int64_t v0 = r.rows, v1 = 0;  // rows with a value byte on this rank
      for (int64_t row = 0; row < r.rows; ++row) {
        const int64_t first = r.offset + 4 * r.rows + row * r.cols, last = first + r.cols - 1;
        const int64_t scale_owner = (r.offset + 4 * row) / shard;
        if (world_size > 1 && (first / shard != scale_owner || last / shard != scale_owner))
          ++split;
        if (world_size == 1 || (first / shard <= rank && rank <= last / shard)) {
          v0 = std::min(v0, row);
          v1 = std::max(v1, row + 1);
        }
      }
      const ElementRange need = streamed.engine->frozen_param_needs(u, f);
      const ElementRange want = v0 < v1 ? ElementRange{v0 * r.cols, v1 * r.cols} : ElementRange{};
      EXPECT_EQ(need.first, want.first) << "unit " << u << " frozen " << f;
      EXPECT_EQ(need.end, want.end) << "unit " << u << " frozen " << f;
    }
  }
  if (world_size == 1) {
    EXPECT_EQ(split, 0);
  } else {
    EXPECT_GT(split, 0);
  }
  // A range that does not cover what the rank needs is refused.
  const ElementRange need = streamed.engine->frozen_param_needs(1, 0);
  if (need.count() > 1) {
    std::vector<float> v(static_cast<size_t>(need.count()));
    EXPECT_THROW(
        streamed.engine->set_frozen_param_range(1, 0, need.first + 1, need.count() - 1, v.data()),
        Error);
  }
}

// The export of an int8 base (one gather of each unit's frozen bytes, decoded and converted on
// run.threads): the same bytes at 1 and 3 threads, and the base's values exactly (bf16-rounded;
// the LoRA adapters' B is 0, so the merge adds nothing); with non-zero adapters the merged export
// is the same at 1 and 3 threads.
TEST(HfShards, Int8BaseExportIsThreadIndependentAndExact) {
  TempDir dir;
  GptConfig c = llama(4);
  Int8Rig src(c);
  export_gpt_hf(*src.engine, world(), c, dir / "one", DType::kBF16, kSmallShard);
  c.run.threads = 3;
  const safetensors::ExportReport r =
      export_gpt_hf(*src.engine, world(), c, dir / "three", DType::kBF16, kSmallShard);
  ASSERT_GT(r.files, 1);
  EXPECT_EQ(listing(dir / "one"), listing(dir / "three"));
  for (const std::string& name : listing(dir / "one")) {
    EXPECT_EQ(read_bytes(dir / ("one/" + name)), read_bytes(dir / ("three/" + name))) << name;
  }
  Rig plain(9, llama());
  import_gpt_hf(*plain.engine, world(), llama(), dir / "three");
  std::vector<std::vector<std::vector<float>>> base(src.engine->num_units());
  for (size_t u = 0; u < src.engine->num_units(); ++u) {
    for (size_t f = 0; f < src.engine->frozen_specs(u).size(); ++f)
      base[u].push_back(src.engine->gather_frozen_param(u, f));
  }
  EXPECT_EQ(plain.masters(), bf16_rounded(base));
  // Non-zero adapters: the merge (rows split between threads) gives the same bytes at 1 and 3.
  for (size_t u = 0; u < src.engine->num_units(); ++u) {
    const UnitShardState st = src.engine->shard_state(u);
    for (int64_t i = 0; i < st.numel; ++i)
      st.master[i] = 0.01f * static_cast<float>((st.begin + i) * 7919 % 97 - 48);
  }
  src.engine->refresh_params_from_master();
  c.run.threads = 1;
  export_gpt_hf(*src.engine, world(), c, dir / "one", DType::kBF16, kSmallShard);
  c.run.threads = 3;
  export_gpt_hf(*src.engine, world(), c, dir / "three", DType::kBF16, kSmallShard);
  for (const std::string& name : listing(dir / "one")) {
    EXPECT_EQ(read_bytes(dir / ("one/" + name)), read_bytes(dir / ("three/" + name))) << name;
  }
  EXPECT_NE(read_bytes(dir / ("one/" + listing(dir / "one")[0])), std::string());
}

TEST(HfShards, AMissingTruncatedOrDoubledShardIsNamed) {
  TempDir dir;
  const GptConfig c = llama();
  Rig a(1, c), b(2, c);
  const safetensors::ExportReport r =
      export_gpt_hf(*a.engine, world(), c, dir / "hf", DType::kF32, kSmallShard);
  const std::string second = safetensors::shard_file_names("model.safetensors", r.files)[1];
  const std::string first = safetensors::shard_file_names("model.safetensors", r.files)[0];
  const auto before = b.masters();
  auto variant_dir = [&](const std::string& name, const std::function<void(const fs::path&)>& f) {
    if (world().rank() == 0) {
      fs::copy(dir / "hf", dir / name);
      f(dir / name);
    }
    world().barrier();
  };
  auto expect_refused = [&](const std::string& name, const std::string& needle) {
    const std::string msg = error_of([&] { import_gpt_hf(*b.engine, world(), c, dir / name); });
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
    EXPECT_EQ(b.masters(), before) << name;
  };
  variant_dir("missing", [&](const fs::path& d) { fs::remove(d / second); });
  expect_refused("missing", dir / ("missing/" + second));
  variant_dir("short", [&](const fs::path& d) {
    fs::resize_file(d / second, fs::file_size(d / second) - 4);
  });
  expect_refused("short", dir / ("short/" + second));
  variant_dir("doubled", [&](const fs::path& d) {
    fs::copy_file(d / first, d / "extra.safetensors");
    std::ifstream in(d / "model.safetensors.index.json");
    json j = json::parse(in);
    in.close();
    // The index also lists the copy (for one tensor of the first file): its tensors are in two.
    for (auto& [name, file] : j["weight_map"].items()) {
      if (file == first) {
        file = "extra.safetensors";
        break;
      }
    }
    std::ofstream(d / "model.safetensors.index.json") << j.dump(2);
  });
  // Either file may be named first (the index's order).
  const std::string doubled =
      error_of([&] { import_gpt_hf(*b.engine, world(), c, dir / "doubled"); });
  EXPECT_NE(doubled.find("tensor \"model.embed_tokens.weight\" is in both "), std::string::npos)
      << doubled;
  EXPECT_NE(doubled.find(dir / ("doubled/" + first)), std::string::npos) << doubled;
  EXPECT_NE(doubled.find(dir / "doubled/extra.safetensors"), std::string::npos) << doubled;
  EXPECT_EQ(b.masters(), before);
}

}  // namespace
}  // namespace zs::nn
