// safetensors export and import of an Engine's consolidated fp32 master weights
// (https://github.com/huggingface/safetensors, docs/checkpoints.md).
//
// File: u64 little-endian N, then N bytes of a UTF-8 JSON header (padded with spaces to a
// multiple of 8), then the tensor data. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the data start) and may
// hold "__metadata__" (string to string). Tensors are named "<unit_name>.<param_name>", stored
// row-major in the order of the units and their parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "runtime/core/dtype.h"
#include "runtime/engine.h"

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

// Writes the consolidated fp32 master weights as `dtype` (kF32 or kBF16, rounded to nearest even)
// to `path`: every rank gathers, rank 0 writes (to path.tmp, fsync, rename). Collective; errors
// are thrown on every rank.
void export_model(Engine& engine, Communicator& comm, const std::string& path,
                  DType dtype = DType::kF32);

// Sets the fp32 master weights from a safetensors file (F32, BF16 or F16 tensors): every rank
// reads the header and the ranges of its own shard. Every "<unit>.<param>" tensor must be present
// with the spec's shape and no other tensor may be (zs::Error(kInvalidArgument) naming the file
// and the tensor); a malformed file gives kCorruptData, a missing one kNotFound. Nothing is changed
// unless every rank succeeded. Optimizer state and step are left as they are. Collective.
void import_model(Engine& engine, Communicator& comm, const std::string& path);

}  // namespace zs::safetensors
