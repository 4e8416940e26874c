// The layout of one unit's frozen parameters ([Note: frozen parameters] in unit/unit.h), as a
// pure value: how each is encoded in its storage dtype, and how the encoded records are laid out
// and sharded as bytes.
//
// [Note: frozen records] A frozen parameter is stored as one record of bytes:
//   int8 storage, a matrix (rows > 0):   rows fp32 scales, then rows * cols int8 values
//                                         (vector-wise: one absmax scale per row, core/quantize.h)
//   int8 storage, any other shape:       numel values in the compute dtype (norms and biases are
//                                         not quantized, as in LLM.int8())
//   fp32 / bf16 / fp16 storage:          numel values in that dtype
// Records are concatenated in the unit's order of its frozen parameters, each starting at a
// multiple of kFrozenAlignBytes, and the whole is a byte group (sharding/layout.h with align =
// kFrozenAlignBytes) that splits into `world` equal byte shards: rank r stores bytes
// [r * shard, (r + 1) * shard) when parameters are sharded, and all of it otherwise; it is
// all-gathered as bytes. A record whose storage is not the compute dtype is converted into the
// compute dtype (dequantized) when its unit computes, into a buffer of convert_numel elements;
// except, when `hand_int8`, an int8 record of a parameter that accepts_int8: it is handed to the
// unit as it is (convert = false, no room in the conversion buffer).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "sharding/layout.h"

namespace zs {

inline constexpr int64_t kFrozenAlignBytes = 64;

struct FrozenParamDesc {
  int64_t numel = 0;
  int64_t rows = 0;  // the first dimension of a matrix (2-D parameter); 0 for any other shape
  bool accepts_int8 = false;  // ParamSpec::accepts_int8: the unit computes from the int8 record
};

struct FrozenRecord {
  DType dtype = DType::kF32;  // kI8 (scales then values) or the float dtype the values are in
  int64_t numel = 0;
  int64_t rows = 0;  // int8 records: one scale per row; else 0
  int64_t cols = 0;
  int64_t bytes = 0;           // the record's size, without alignment padding
  bool convert = false;        // converted into the compute dtype before its unit computes
  int64_t convert_offset = 0;  // first element in the conversion buffer (when convert)
  int64_t offset = 0;          // first byte in the padded byte group
};

struct FrozenLayout {
  std::vector<FrozenRecord> records;  // in the order of the unit's frozen parameters
  GroupLayout bytes;                  // the byte group: params[i] is records[i]'s bytes
  int64_t convert_numel = 0;          // compute-dtype elements converted at each use
  int64_t numel() const;              // parameter elements, without padding
  bool empty() const { return records.empty(); }
};

// Throws zs::Error(kInvalidArgument) for a storage dtype other than fp32/bf16/fp16/int8, a
// compute dtype other than fp32/bf16/fp16, world < 1, or a parameter with numel < 1 or rows
// that do not divide it. `hand_int8`: FrozenPolicy::hands_int8() (runtime/engine_config.h).
FrozenLayout compute_frozen_layout(std::span<const FrozenParamDesc> params, DType storage,
                                   DType compute, int world, bool hand_int8 = false);

// The bytes of one record from a parameter's full fp32 values (int8: vector-wise quantization
// with round half to even; floats: rounded once to nearest even). `out` holds record.bytes.
void encode_frozen_record(const float* values, const FrozenRecord& record, void* out);
// A source of a frozen parameter's fp32 values: writes elements [first, first + n) to out. May be
// called from several threads at once (on disjoint ranges).
using FrozenValues = std::function<void(int64_t first, int64_t n, float* out)>;
// Bytes [begin, end) of the record encode_frozen_record writes (offsets in the record,
// 0 <= begin <= end <= record.bytes), into out[0, end - begin), asking `values` only for the
// elements those bytes depend on: for int8, whole rows (one scale per row), those whose scale or
// values the range overlaps; for floats, the elements it overlaps. The bytes equal the
// corresponding bytes of encode_frozen_record. Values are asked for and encoded a piece of at
// most about 2^16 elements (or one row) at a time, on up to `threads` OpenMP threads (0: the
// OpenMP default); the bytes do not depend on the thread count.
void encode_frozen_range(const FrozenRecord& record, int64_t begin, int64_t end,
                         const FrozenValues& values, void* out, int threads = 1);
// For an int8 matrix record: value bytes [begin, end) (4 * rows <= begin <= end <= bytes) as
// encode_frozen_range writes them, drawing only the rows those bytes overlap, and the scale of
// each of those rows into row_scales[row] (row_scales holds record.rows floats; the other rows'
// entries are left as they are). A rank that stores a record's scales but not all its values gets
// the others' scales from the ranks that store them (ParamGroup::set_frozen_collective) instead of
// drawing their rows.
void encode_int8_values(const FrozenRecord& record, int64_t begin, int64_t end,
                        const FrozenValues& values, void* out, float* row_scales, int threads = 1);
// Elements [first, end) of a parameter, in its row-major order.
struct ElementRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t count() const { return end - first; }
};
// The elements encode_frozen_range(record, begin, end, ...) asks `values` for, as one range: for
// int8, the whole rows from the first to the last row whose scale or values bytes [begin, end)
// overlap; for floats, the elements they overlap. Empty ({0, 0}) when begin == end. The same
// bounds as encode_frozen_range.
ElementRange frozen_elements_of_bytes(const FrozenRecord& record, int64_t begin, int64_t end);
// The fp32 values a record holds (int8: q * scale), numel of them, decoded a piece of about
// 2^16 elements (whole rows for int8) at a time on up to `threads` OpenMP threads (0: the OpenMP
// default); the values do not depend on the thread count.
void decode_frozen_record(const void* record_bytes, const FrozenRecord& record, float* out,
                          int threads = 1);
// The record's values in the compute dtype, as a unit sees them: for int8 each q * scale is
// computed in fp32 and rounded once to `compute`; for floats the conversion of core/convert.h.
// Host memory.
void convert_frozen_record(const void* record_bytes, const FrozenRecord& record, void* out,
                           DType compute);

}  // namespace zs
