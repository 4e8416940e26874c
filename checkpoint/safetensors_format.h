// The safetensors file header as a pure value, with a parser that takes bytes in memory (tested
// and fuzzed on its own, fuzz/). Format: https://github.com/huggingface/safetensors; the export and
// import of an Engine's weights are in checkpoint/safetensors.h.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace zs::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // as the reference loader

struct TensorInfo {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", ... as in the file
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data start
  uint64_t end = 0;
};

struct Header {
  uint64_t header_bytes = 0;        // N
  std::vector<TensorInfo> tensors;  // in order of their data
  std::map<std::string, std::string> metadata;
  uint64_t data_start() const { return 8 + header_bytes; }
};

// Bytes per element of a safetensors dtype name; 0 for an unknown name.
size_t dtype_bytes(const std::string& dtype);

// N from the first 8 bytes. Throws zs::Error(kCorruptData) for fewer than 8 bytes or N larger
// than kMaxHeaderBytes.
uint64_t header_length(std::span<const std::byte> first8);
// Parses the N header bytes (the JSON) of a file whose data part holds `data_bytes` bytes. Checks
// what the format requires: known dtypes, non-negative shapes, end - begin = numel * size, and
// tensors that tile the data part exactly (no overlap, no hole). Throws zs::Error(kCorruptData).
Header parse_header(std::span<const std::byte> json_bytes, uint64_t data_bytes);

}  // namespace zs::safetensors
