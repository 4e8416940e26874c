#include "checkpoint/safetensors_shards.h"

#include <cctype>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zs::safetensors {
namespace {

// "model" of "model.safetensors".
std::string stem_of(const std::string& weights) {
  const std::string ext = ".safetensors";
  if (weights.size() > ext.size() &&
      weights.compare(weights.size() - ext.size(), ext.size(), ext) == 0)
    return weights.substr(0, weights.size() - ext.size());
  return weights;
}

bool all_digits(const std::string& s, size_t from, size_t n) {
  if (from + n > s.size()) return false;
  for (size_t i = from; i < from + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

}  // namespace

ShardPlan plan_shards(std::span<const int64_t> tensor_bytes, int64_t max_shard_bytes) {
  ZS_CHECK(max_shard_bytes >= 1, ErrorCode::kInvalidArgument,
           "shard plan: the largest shard is {} bytes (at least 1 expected)", max_shard_bytes);
  ShardPlan plan;
  plan.shard_bytes.push_back(0);
  int64_t in_current = 0;  // tensors in the current file
  for (const int64_t b : tensor_bytes) {
    ZS_CHECK(b >= 0, ErrorCode::kInvalidArgument, "shard plan: a tensor of {} bytes", b);
    // As save_pretrained: split before a tensor that tips the current file over the limit, only if
    // the file holds a tensor already.
    if (in_current > 0 && plan.shard_bytes.back() + b > max_shard_bytes) {
      plan.shard_bytes.push_back(0);
      in_current = 0;
    }
    plan.shard_of.push_back(plan.count() - 1);
    plan.shard_bytes.back() += b;
    ++in_current;
  }
  return plan;
}

std::vector<std::string> shard_file_names(const std::string& weights, int count) {
  if (count <= 1) return {weights};
  std::vector<std::string> names;
  for (int i = 1; i <= count; ++i)
    names.push_back(fmt::format("{}-{:05d}-of-{:05d}.safetensors", stem_of(weights), i, count));
  return names;
}

std::string shard_index_name(const std::string& weights) { return weights + ".index.json"; }

bool is_layout_file(const std::string& weights, const std::string& name) {
  if (name == weights || name == shard_index_name(weights)) return true;
  // "<stem>-NNNNN-of-NNNNN.safetensors"
  const std::string stem = stem_of(weights) + "-", ext = ".safetensors";
  if (name.size() != stem.size() + 14 + ext.size() || name.compare(0, stem.size(), stem) != 0)
    return false;
  const size_t at = stem.size();
  return all_digits(name, at, 5) && name.compare(at + 5, 4, "-of-") == 0 &&
         all_digits(name, at + 9, 5) && name.compare(at + 14, ext.size(), ext) == 0;
}

std::string shard_index_json(std::span<const std::string> tensors,
                             std::span<const std::string> files, int64_t total_bytes) {
  ZS_CHECK(tensors.size() == files.size(), ErrorCode::kInvalidArgument,
           "shard index: {} tensors, {} files", tensors.size(), files.size());
  nlohmann::json j;  // std::map keys: sorted, as json.dumps(sort_keys=True)
  j["metadata"]["total_size"] = total_bytes;
  j["weight_map"] = nlohmann::json::object();
  for (size_t i = 0; i < tensors.size(); ++i) j["weight_map"][tensors[i]] = files[i];
  return j.dump(2) + "\n";
}

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  auto refuse = [&](const std::string& why) {
    fail(ErrorCode::kInvalidArgument,
         "{} {}: {} (an integer of bytes, or one followed by KB, MB, GB (10^3, 10^6, 10^9) or "
         "KiB, MiB, GiB (2^10, 2^20, 2^30), e.g. 5GB)",
         flag, text.empty() ? "\"\"" : text, why);
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) refuse("not a size");
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // transformers reads "5Gb" as bits; KiB, MiB, GiB in any case.
  if (!unit.empty() && text.back() == 'b' && (unit.size() < 2 || unit[unit.size() - 2] != 'I'))
    refuse("a unit ending in a lowercase b means bits in transformers; write B");
  int64_t scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "KB")
    scale = 1'000;
  else if (unit == "MB")
    scale = 1'000'000;
  else if (unit == "GB")
    scale = 1'000'000'000;
  else if (unit == "KIB")
    scale = int64_t{1} << 10;
  else if (unit == "MIB")
    scale = int64_t{1} << 20;
  else if (unit == "GIB")
    scale = int64_t{1} << 30;
  else
    refuse(fmt::format("unknown unit \"{}\"", text.substr(digits)));
  const std::string number = text.substr(0, digits);
  if (digits > 18) refuse("too large");
  const int64_t n = std::stoll(number);
  if (n > std::numeric_limits<int64_t>::max() / scale) refuse("too large");
  if (n < 1) refuse("must be at least 1 byte");
  return n * scale;
}

}  // namespace zs::safetensors
