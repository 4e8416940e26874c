// Internal to the safetensors export and import (checkpoint/safetensors.h): how an engine's
// parameters map onto a file's tensors, through a TensorNamer. Not a public header.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/dtype.h"
#include "runtime/engine.h"

namespace zs::safetensors {

// The dtypes the import converts from (F32, BF16, F16): false for another name.
bool to_dtype(const std::string& name, DType& out);
// Rows of a parameter as TensorPiece counts them: its first dimension (a scalar: one).
int64_t rows_of(const ParamSpec& s);
// Elements per row.
int64_t row_numel(const ParamSpec& s);
// The tensors of a parameter: its pieces, or the one tensor covering every row.
std::vector<TensorPiece> pieces_of(const TensorName& n, const ParamSpec& s);
// The file layout of piece `p` of parameter `s`: [p.rows, the other dimensions...], or the
// transpose [c, r] of a whole 2-D parameter [r, c] stored transposed.
std::vector<int64_t> piece_shape(const ParamSpec& s, const TensorName& n, const TensorPiece& p);

// The namer's answer for every parameter of the engine, trainable [unit][param] and frozen
// [unit][frozen param], checked: transposed parameters are 2-D, pieces cover their parameter and,
// for an export (`distinct`), no name is given twice. zs::Error(kInvalidArgument) otherwise.
struct Names {
  std::vector<std::vector<TensorName>> trainable, frozen;
};
Names resolve_names(Engine& e, const TensorNamer& namer, bool distinct);

// dst[i * rows + j] = src[j * cols + i]: [rows, cols] -> [cols, rows].
void transpose(const float* src, float* dst, int64_t rows, int64_t cols);

}  // namespace zs::safetensors
