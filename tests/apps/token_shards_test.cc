// zs_train's token-shard reader (apps/zs_train/token_shards.h): the header parser on bytes
// alone, and the reader on shards this test writes (uint16 and uint32, two files matched by a
// glob), with every refusal's exact message.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "token_shards.h"

namespace zs::train {
namespace {

namespace fs = std::filesystem;

// A shard's bytes: the header (magic, version, count; the rest zero) and `tokens` in
// `token_bytes` little-endian bytes each.
std::vector<uint8_t> shard_bytes(int32_t magic, int32_t version, int32_t count,
                                 const std::vector<uint32_t>& tokens, int token_bytes) {
  std::vector<uint8_t> out(kShardHeaderBytes, 0);
  const int32_t fields[3] = {magic, version, count};
  for (int f = 0; f < 3; ++f)
    for (int b = 0; b < 4; ++b)
      out[static_cast<size_t>(4 * f + b)] =
          static_cast<uint8_t>(static_cast<uint32_t>(fields[f]) >> (8 * b));
  for (uint32_t t : tokens)
    for (int b = 0; b < token_bytes; ++b) out.push_back(static_cast<uint8_t>(t >> (8 * b)));
  return out;
}

std::vector<uint8_t> u16_shard(const std::vector<uint32_t>& tokens) {
  return shard_bytes(kShardMagicU16, 1, static_cast<int32_t>(tokens.size()), tokens, 2);
}

std::vector<uint8_t> u32_shard(const std::vector<uint32_t>& tokens) {
  return shard_bytes(kShardMagicU32, 1, static_cast<int32_t>(tokens.size()), tokens, 4);
}

// The message zs::Error carries when `f` throws; "" when it does not.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { parse_shard_header(bytes, static_cast<int64_t>(bytes.size()), "s.bin"); });
}

class TokenShardFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zs_token_shards_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST(ShardHeader, ParsesBothWidths) {
  const ShardHeader a = parse_shard_header(u16_shard({1, 2, 3}), kShardHeaderBytes + 6, "a");
  EXPECT_EQ(a.token_bytes, 2);
  EXPECT_EQ(a.tokens, 3);
  const ShardHeader b = parse_shard_header(u32_shard({70000, 2}), kShardHeaderBytes + 8, "b");
  EXPECT_EQ(b.token_bytes, 4);
  EXPECT_EQ(b.tokens, 2);
}

TEST(ShardHeader, RefusesEachMalformedHeaderNamingTheFile) {
  EXPECT_EQ(parse_error(std::vector<uint8_t>(1000, 0)),
            "token shard s.bin: 1000 bytes is too small for the header of 256 int32 (1024 bytes)");
  EXPECT_EQ(parse_error(shard_bytes(12345, 1, 1, {7}, 2)),
            "token shard s.bin: magic 12345 is not llm.c's: expected 20240520 (uint16 tokens) or "
            "20240801 (uint32 tokens)");
  EXPECT_EQ(parse_error(shard_bytes(kShardMagicU16, 2, 1, {7}, 2)),
            "token shard s.bin: version 2 is not supported (expected 1)");
  EXPECT_EQ(parse_error(shard_bytes(kShardMagicU16, 1, 0, {}, 2)),
            "token shard s.bin: holds no tokens (token count 0)");
  EXPECT_EQ(parse_error(shard_bytes(kShardMagicU16, 1, 3, {1, 2}, 2)),
            "token shard s.bin: the header's 3 tokens of 2 bytes need 6 bytes after the header, "
            "the file has 4 (truncated)");
  EXPECT_EQ(parse_error(shard_bytes(kShardMagicU32, 1, 1, {1, 2}, 4)),
            "token shard s.bin: the header's 1 tokens of 4 bytes need 4 bytes after the header, "
            "the file has 8 (trailing bytes)");
  // The size is the file's, not the span's: a header read alone is checked against the file.
  const std::vector<uint8_t> head = u16_shard({1, 2});
  EXPECT_EQ(error_of([&] { parse_shard_header(head, kShardHeaderBytes + 2, "h.bin"); }),
            "token shard h.bin: the header's 2 tokens of 2 bytes need 4 bytes after the header, "
            "the file has 2 (truncated)");
}

TEST_F(TokenShardFiles, ReadsUint16AndUint32ShardsInGlobOrder) {
  write("train_001.bin", u32_shard({70000, 5, 6}));  // listed second by name
  write("train_000.bin", u16_shard({1, 2, 65535}));
  write("other.bin", u16_shard({9}));
  EXPECT_EQ(shard_files(path("train_*.bin")),
            (std::vector<std::string>{path("train_000.bin"), path("train_001.bin")}));
  std::vector<int32_t> tokens;
  for (const std::string& f : shard_files(path("train_*.bin"))) read_shard(f, 70001, tokens);
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2, 65535, 70000, 5, 6}));
  EXPECT_EQ(token_shard_bytes(path("train_*.bin"), path("other.bin")), 7 * 4);
}

TEST_F(TokenShardFiles, RefusesAPatternThatMatchesNothing) {
  EXPECT_EQ(error_of([&] { shard_files(path("none_*.bin")); }),
            "no file matches the token-shard pattern '" + path("none_*.bin") + "'");
}

TEST_F(TokenShardFiles, RefusesATokenOutsideTheVocabularyWithItsOffset) {
  const std::string f = write("v.bin", u32_shard({1, 2, 300, 4}));
  std::vector<int32_t> tokens;
  EXPECT_EQ(error_of([&] { read_shard(f, 256, tokens); }),
            "token shard " + f +
                ": token 300 at token offset 2 (byte offset 1032) is not below the model's "
                "vocabulary (--vocab 256)");
  tokens.clear();
  read_shard(f, 301, tokens);  // the boundary: 300 < 301
  EXPECT_EQ(tokens.size(), 4u);
}

TEST_F(TokenShardFiles, RefusesATruncatedFileAndAMissingOne) {
  std::vector<uint8_t> cut = u16_shard({1, 2, 3});
  cut.pop_back();
  const std::string f = write("cut.bin", cut);
  std::vector<int32_t> tokens;
  EXPECT_EQ(error_of([&] { read_shard(f, 256, tokens); }),
            "token shard " + f +
                ": the header's 3 tokens of 2 bytes need 6 bytes after the header, the file has "
                "5 (truncated)");
  EXPECT_EQ(error_of([&] { read_shard(path("gone.bin"), 256, tokens); }),
            "token shard " + path("gone.bin") + " cannot be read");
}

// The dataset over shards: the training stream then the validation shards, sampled as bytes are.
TEST_F(TokenShardFiles, DatasetSplitsByValShardsOrByFraction) {
  std::vector<uint32_t> train(40), val(12);
  for (uint32_t i = 0; i < train.size(); ++i) train[i] = 1000 + i;
  for (uint32_t i = 0; i < val.size(); ++i) val[i] = 2000 + i;
  write("t.bin", u16_shard(train));
  write("val.bin", u32_shard(val));
  const int context = 3;
  const TokenShardDataset with_val(path("t.bin"), path("val.bin"), 0.1, context, 4096);
  EXPECT_EQ(with_val.train_tokens(), 40);
  EXPECT_EQ(with_val.val_tokens(), 12);
  EXPECT_STREQ(with_val.unit(), "tokens");
  EXPECT_FALSE(with_val.text());
  EXPECT_EQ(with_val.sample_prompt("ignored"), (std::vector<int32_t>{2000}));
  std::vector<int32_t> v;
  with_val.fill_val(1, 1, 0, 2, v);  // two sequences: the first and the last window of val
  EXPECT_EQ(v, (std::vector<int32_t>{2000, 2001, 2002, 2003, 2008, 2009, 2010, 2011}));
  std::vector<int32_t> t;
  with_val.fill_train(0, 2, 2, 1, 3, 7, t);
  ASSERT_EQ(t.size(), 2u * 3 * (context + 1));
  for (size_t r = 0; r < t.size(); r += context + 1) {  // consecutive training tokens
    EXPECT_GE(t[r], 1000);
    EXPECT_LE(t[r] + context, 1039);
    for (int k = 1; k <= context; ++k) EXPECT_EQ(t[r + k], t[r] + k);
  }
  const TokenShardDataset by_fraction(path("t.bin"), "", 0.25, context, 4096);
  EXPECT_EQ(by_fraction.train_tokens(), 30);
  EXPECT_EQ(by_fraction.val_tokens(), 10);
  EXPECT_NE(by_fraction.content_hash(), with_val.content_hash());
  EXPECT_EQ(error_of([&] { TokenShardDataset(path("t.bin"), path("val.bin"), 0.1, 20, 4096); }),
            "token shards '" + path("t.bin") + "' (40 tokens) and '" + path("val.bin") +
                "' (12 tokens): too short for training and validation sequences of 21 tokens "
                "(context 20 + 1) (the training and the validation shards)");
}

}  // namespace
}  // namespace zs::train
