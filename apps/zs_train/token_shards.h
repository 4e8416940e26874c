// llm.c's token shards (karpathy/llm.c, dev/data/data_common.py): a header of 256 little-endian
// int32 — [0] magic 20240520 (uint16 tokens) or 20240801 (uint32 tokens), [1] version 1, [2] the
// token count — then the tokens. A dataset is one file or a glob of shards (sorted), read whole
// and checked before any training (docs/reliability.md): each refusal names the file, and a token
// the model cannot embed is named with its offset.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dataset.h"

namespace zs::train {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int64_t kShardHeaderBytes = 256 * 4;

struct ShardHeader {
  int token_bytes = 0;  // 2 or 4
  int64_t tokens = 0;   // > 0
};

// Parses the start of `file` (`bytes`: at least its first kShardHeaderBytes, when it has them)
// against its size `file_size`. Pure. Throws zs::Error(kCorruptData) naming `file` for a file too
// small for a header, a wrong magic (naming the accepted ones), a version other than 1, no tokens,
// or a count that disagrees with the size (truncated or trailing bytes).
ShardHeader parse_shard_header(std::span<const uint8_t> bytes, int64_t file_size,
                               const std::string& file);

// The files `pattern` matches (POSIX glob(), sorted); a pattern without wildcards matches the file
// itself when it exists. Throws zs::Error(kNotFound) naming the pattern when nothing matches.
std::vector<std::string> shard_files(const std::string& pattern);

// Appends `file`'s tokens to `out`. Throws what parse_shard_header() throws, kNotFound for a file
// that cannot be read, and kInvalidArgument naming the file, the token and its offset (in tokens
// and in bytes) for a token id >= `vocab`.
void read_shard(const std::string& file, int vocab, std::vector<int32_t>& out);

// The bytes a TokenShardDataset of these patterns holds in memory (4 per token), from the
// headers alone; `val_pattern` may be empty. Throws what shard_files() and the header parser throw.
int64_t token_shard_bytes(const std::string& train_pattern, const std::string& val_pattern);

// Token shards as a Dataset: the training shards' tokens, then the validation set — the shards of
// `val_pattern`, or without one the last `val_fraction` of the training tokens.
class TokenShardDataset : public Dataset {
 public:
  // Throws what shard_files() and read_shard() throw, and kInvalidArgument when either part is
  // too short for one sequence of context + 1 tokens.
  TokenShardDataset(const std::string& train_pattern, const std::string& val_pattern,
                    double val_fraction, int context, int vocab);

  bool text() const override { return false; }
  uint64_t content_hash() const override;
  std::vector<int32_t> sample_prompt(const std::string& prompt) const override;

 private:
  void copy_sequence(int64_t start, int32_t* out) const override;
  std::vector<int32_t> tokens_;
};

}  // namespace zs::train
