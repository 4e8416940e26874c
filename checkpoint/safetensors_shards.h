// A model's tensors split into several safetensors files as Hugging Face's save_pretrained splits
// them (docs/interop.md): the shard plan, the files' names and the index beside them, as pure
// values, and the parser of a size such as "5GB".
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zs::safetensors {

// save_pretrained's default max_shard_size, "5GB".
inline constexpr int64_t kDefaultShardBytes = 5'000'000'000;

struct ShardPlan {
  std::vector<int> shard_of;         // tensor i -> its file, 0-based, non-decreasing
  std::vector<int64_t> shard_bytes;  // data bytes of each file
  int count() const { return static_cast<int>(shard_bytes.size()); }
};

// The tensors, of tensor_bytes[i] data bytes each and in file order, assigned to files greedily in
// order: a tensor starts a new file when it would take the current (non-empty) one past
// max_shard_bytes; a tensor is never split, so one larger than the limit is alone in its file.
// At least one file (an empty model: one empty file). zs::Error(kInvalidArgument) when
// max_shard_bytes < 1 or a size is negative.
ShardPlan plan_shards(std::span<const int64_t> tensor_bytes, int64_t max_shard_bytes);

// The file names of a plan of `count` files from `weights` ("model.safetensors"): itself when
// count is 1, else "model-00001-of-00003.safetensors", ... (transformers' names).
std::vector<std::string> shard_file_names(const std::string& weights, int count);
// The index beside sharded files ("model.safetensors.index.json" for "model.safetensors").
std::string shard_index_name(const std::string& weights);
// True for a name this layout of `weights` may use: the single file, any "<stem>-NNNNN-of-NNNNN"
// shard, or the index (what an export over another layout's files removes).
bool is_layout_file(const std::string& weights, const std::string& name);

// The index's content: {"metadata": {"total_size": total_bytes}, "weight_map": {tensor: file}},
// keys sorted, indented by 2, with a final newline, as transformers writes it.
std::string shard_index_json(std::span<const std::string> tensors,
                             std::span<const std::string> files, int64_t total_bytes);

// A size as save_pretrained's max_shard_size takes it: an integer of bytes, or an integer followed
// by B, KB, MB, GB (10^3, 10^6, 10^9) or KiB, MiB, GiB (2^10, 2^20, 2^30), the letters in any
// case, except that "b" ending B, KB, MB or GB (bits in transformers: "5Gb") is refused. At least
// 1 byte.
// zs::Error(kInvalidArgument) naming `flag` and the text otherwise.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace zs::safetensors
