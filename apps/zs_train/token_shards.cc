#include "token_shards.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/error.h"
#include "paths.h"

namespace zs::train {
namespace {

constexpr ErrorCode kCorrupt = ErrorCode::kCorruptData;

int32_t header_field(std::span<const uint8_t> bytes, int i) {
  uint32_t v = 0;
  for (int b = 3; b >= 0; --b) v = (v << 8) | bytes[static_cast<size_t>(4 * i + b)];
  return static_cast<int32_t>(v);
}

std::vector<uint8_t> read_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  ZS_CHECK(in.good(), ErrorCode::kNotFound, "token shard {} cannot be read", file);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Reads the header alone (for the memory check, before the data is loaded).
ShardHeader read_header(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  ZS_CHECK(in.good(), ErrorCode::kNotFound, "token shard {} cannot be read", file);
  std::vector<uint8_t> head(kShardHeaderBytes);
  in.read(reinterpret_cast<char*>(head.data()), kShardHeaderBytes);
  head.resize(static_cast<size_t>(in.gcount()));
  return parse_shard_header(head, static_cast<int64_t>(std::filesystem::file_size(file)), file);
}

// Every shard of `pattern`, appended to `out`.
void read_shards(const std::string& pattern, int vocab, std::vector<int32_t>& out) {
  for (const std::string& f : shard_files(pattern)) read_shard(f, vocab, out);
}

}  // namespace

ShardHeader parse_shard_header(std::span<const uint8_t> bytes, int64_t file_size,
                               const std::string& file) {
  ZS_CHECK(file_size >= kShardHeaderBytes && bytes.size() >= kShardHeaderBytes, kCorrupt,
           "token shard {}: {} bytes is too small for the header of 256 int32 ({} bytes)", file,
           file_size, kShardHeaderBytes);
  const int32_t magic = header_field(bytes, 0), version = header_field(bytes, 1);
  ZS_CHECK(magic == kShardMagicU16 || magic == kShardMagicU32, kCorrupt,
           "token shard {}: magic {} is not llm.c's: expected {} (uint16 tokens) or {} (uint32 "
           "tokens)",
           file, magic, kShardMagicU16, kShardMagicU32);
  ZS_CHECK(version == 1, kCorrupt, "token shard {}: version {} is not supported (expected 1)", file,
           version);
  ShardHeader h;
  h.token_bytes = magic == kShardMagicU16 ? 2 : 4;
  h.tokens = header_field(bytes, 2);
  ZS_CHECK(h.tokens > 0, kCorrupt, "token shard {}: holds no tokens (token count {})", file,
           h.tokens);
  const int64_t body = file_size - kShardHeaderBytes, want = h.tokens * h.token_bytes;
  ZS_CHECK(body == want, kCorrupt,
           "token shard {}: the header's {} tokens of {} bytes need {} bytes after the header, the "
           "file has {} ({})",
           file, h.tokens, h.token_bytes, want, body, body < want ? "truncated" : "trailing bytes");
  return h;
}

std::vector<std::string> shard_files(const std::string& pattern) {
  std::vector<std::string> files = glob_paths(pattern);
  ZS_CHECK(!files.empty(), ErrorCode::kNotFound, "no file matches the token-shard pattern '{}'",
           pattern);
  return files;
}

void read_shard(const std::string& file, int vocab, std::vector<int32_t>& out) {
  const std::vector<uint8_t> bytes = read_file(file);
  const ShardHeader h = parse_shard_header(bytes, static_cast<int64_t>(bytes.size()), file);
  const uint8_t* p = bytes.data() + kShardHeaderBytes;
  out.reserve(out.size() + static_cast<size_t>(h.tokens));
  for (int64_t i = 0; i < h.tokens; ++i, p += h.token_bytes) {
    uint32_t id = 0;
    for (int b = h.token_bytes - 1; b >= 0; --b) id = (id << 8) | p[b];
    ZS_CHECK(id < static_cast<uint32_t>(vocab), ErrorCode::kInvalidArgument,
             "token shard {}: token {} at token offset {} (byte offset {}) is not below the "
             "model's vocabulary (--vocab {})",
             file, id, i, kShardHeaderBytes + i * h.token_bytes, vocab);
    out.push_back(static_cast<int32_t>(id));
  }
}

int64_t token_shard_bytes(const std::string& train_pattern, const std::string& val_pattern) {
  int64_t tokens = 0;
  for (const std::string& pattern : {train_pattern, val_pattern}) {
    if (pattern.empty()) continue;
    for (const std::string& f : shard_files(pattern)) tokens += read_header(f).tokens;
  }
  return tokens * static_cast<int64_t>(sizeof(int32_t));
}

TokenShardDataset::TokenShardDataset(const std::string& train_pattern,
                                     const std::string& val_pattern, double val_fraction,
                                     int context, int vocab)
    : Dataset(context) {
  read_shards(train_pattern, vocab, tokens_);
  const int64_t train = static_cast<int64_t>(tokens_.size());
  if (!val_pattern.empty()) {
    read_shards(val_pattern, vocab, tokens_);
    set_split(static_cast<int64_t>(tokens_.size()), train,
              fmt::format("token shards '{}' ({} tokens) and '{}' ({} tokens)", train_pattern,
                          train, val_pattern, static_cast<int64_t>(tokens_.size()) - train),
              "(the training and the validation shards)");
    return;
  }
  set_split(train, train - static_cast<int64_t>(static_cast<double>(train) * val_fraction),
            fmt::format("token shards '{}' have {} tokens", train_pattern, train),
            fmt::format("with --val-fraction {}", val_fraction));
}

uint64_t TokenShardDataset::content_hash() const {
  return XXH3_64bits(tokens_.data(), tokens_.size() * sizeof(int32_t));
}

std::vector<int32_t> TokenShardDataset::sample_prompt(const std::string&) const {
  return {tokens_[static_cast<size_t>(train_tokens())]};
}

void TokenShardDataset::copy_sequence(int64_t start, int32_t* out) const {
  std::memcpy(out, tokens_.data() + start, static_cast<size_t>(context() + 1) * sizeof(int32_t));
}

}  // namespace zs::train
