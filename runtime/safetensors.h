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
#include "core/dtype.h"
#include "runtime/engine.h"
#include "runtime/safetensors_format.h"

namespace zs::safetensors {

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
