#include "checkpoint/safetensors_names.h"

#include <set>

#include "core/error.h"

namespace zs::safetensors {
namespace {

// The file layout of a 2-D parameter [r, c] stored transposed: [c, r].
std::vector<int64_t> file_shape(const ParamSpec& s, bool transposed) {
  if (!transposed) return s.shape;
  return {s.shape[1], s.shape[0]};
}

// Pieces cover the parameter's rows in order from 0, none empty, none transposed.
void check_pieces(const std::string& unit, const ParamSpec& s, const TensorName& n) {
  if (n.pieces.empty()) return;
  ZS_CHECK(!n.transposed, ErrorCode::kInvalidArgument,
           "safetensors: parameter {}.{} is assembled from pieces and stored transposed", unit,
           s.name);
  int64_t next = 0;
  for (const TensorPiece& p : n.pieces) {
    ZS_CHECK(!p.name.empty() && p.rows > 0 && p.first_row == next, ErrorCode::kInvalidArgument,
             "safetensors: piece \"{}\" of {}.{} covers rows [{}, {}), row {} expected first",
             p.name, unit, s.name, p.first_row, p.first_row + p.rows, next);
    next += p.rows;
  }
  ZS_CHECK(next == rows_of(s), ErrorCode::kInvalidArgument,
           "safetensors: the pieces of {}.{} cover {} rows of {}", unit, s.name, next, rows_of(s));
}

}  // namespace

// The dtypes this module converts from.
bool to_dtype(const std::string& name, DType& out) {
  if (name == "F32")
    out = DType::kF32;
  else if (name == "BF16")
    out = DType::kBF16;
  else if (name == "F16")
    out = DType::kF16;
  else
    return false;
  return true;
}

int64_t rows_of(const ParamSpec& s) { return s.shape.empty() ? 1 : s.shape[0]; }
int64_t row_numel(const ParamSpec& s) {
  const int64_t r = rows_of(s);
  return r == 0 ? 0 : s.numel() / r;
}

std::vector<TensorPiece> pieces_of(const TensorName& n, const ParamSpec& s) {
  if (!n.pieces.empty()) return n.pieces;
  return {TensorPiece{n.name, 0, rows_of(s)}};
}

std::vector<int64_t> piece_shape(const ParamSpec& s, const TensorName& n, const TensorPiece& p) {
  if (n.transposed) return file_shape(s, true);
  std::vector<int64_t> shape = s.shape;
  if (!shape.empty()) shape[0] = p.rows;
  return shape;
}

Names resolve_names(Engine& e, const TensorNamer& namer, bool distinct) {
  Names names;
  names.trainable.resize(e.num_units());
  names.frozen.resize(e.num_units());
  std::set<std::string> seen;
  auto resolve = [&](size_t u, const ParamSpec& s) {
    TensorName n = namer ? namer(e.unit_name(u), s) : default_tensor_name(e.unit_name(u), s);
    ZS_CHECK(!n.name.empty() || !n.pieces.empty(), ErrorCode::kInvalidArgument,
             "safetensors: no tensor name for parameter {}.{}", e.unit_name(u), s.name);
    check_pieces(e.unit_name(u), s, n);
    for (const TensorPiece& p : pieces_of(n, s)) {
      ZS_CHECK(seen.insert(p.name).second || !distinct, ErrorCode::kInvalidArgument,
               "safetensors: tensor name \"{}\" given to two parameters (the second: {}.{})",
               p.name, e.unit_name(u), s.name);
    }
    ZS_CHECK(!n.transposed || s.shape.size() == 2, ErrorCode::kInvalidArgument,
             "safetensors: parameter {}.{} is stored transposed but has {} dimensions",
             e.unit_name(u), s.name, s.shape.size());
    return n;
  };
  for (size_t u = 0; u < e.num_units(); ++u) {
    for (const ParamSpec& s : e.param_specs(u)) names.trainable[u].push_back(resolve(u, s));
    for (const ParamSpec& s : e.frozen_specs(u)) names.frozen[u].push_back(resolve(u, s));
  }
  return names;
}

void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t i = 0; i < cols; ++i) dst[i * rows + j] = src[j * cols + i];
  }
}

}  // namespace zs::safetensors
