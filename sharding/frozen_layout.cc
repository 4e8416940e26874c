#include "sharding/frozen_layout.h"

#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/quantize.h"

namespace zs {

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace

int64_t FrozenLayout::numel() const {
  int64_t n = 0;
  for (const FrozenRecord& r : records) n += r.numel;
  return n;
}

FrozenLayout compute_frozen_layout(std::span<const FrozenParamDesc> params, DType storage,
                                   DType compute, int world, bool hand_int8) {
  ZS_CHECK(is_float(storage) || storage == DType::kI8, ErrorCode::kInvalidArgument,
           "frozen storage dtype {} is not one of fp32, bf16, fp16, int8", dtype_name(storage));
  ZS_CHECK(is_float(compute), ErrorCode::kInvalidArgument,
           "compute dtype {} is not one of fp32, bf16, fp16", dtype_name(compute));
  FrozenLayout l;
  // Converted values start 64-byte aligned in the conversion buffer.
  const int64_t convert_align = kFrozenAlignBytes / static_cast<int64_t>(dtype_size(compute));
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < params.size(); ++i) {
    const FrozenParamDesc& p = params[i];
    ZS_CHECK(p.numel >= 1 && p.rows >= 0 && (p.rows == 0 || p.numel % p.rows == 0),
             ErrorCode::kInvalidArgument,
             "frozen parameter {}: {} elements in {} rows is not a matrix or a vector", i, p.numel,
             p.rows);
    FrozenRecord r;
    r.numel = p.numel;
    if (storage == DType::kI8 && p.rows > 0) {
      r.dtype = DType::kI8;
      r.rows = p.rows;
      r.cols = p.numel / p.rows;
      r.bytes = 4 * r.rows + r.numel;
    } else {
      r.dtype = storage == DType::kI8 ? compute : storage;
      r.bytes = r.numel * static_cast<int64_t>(dtype_size(r.dtype));
    }
    r.convert = r.dtype != compute && !(r.dtype == DType::kI8 && hand_int8 && p.accepts_int8);
    if (r.convert) {
      r.convert_offset = round_up(l.convert_numel, convert_align);
      l.convert_numel = r.convert_offset + r.numel;
    }
    sizes.push_back(r.bytes);
    l.records.push_back(r);
  }
  l.convert_numel = round_up(l.convert_numel, convert_align);
  l.bytes = compute_group_layout(sizes, world, kFrozenAlignBytes);
  for (size_t i = 0; i < l.records.size(); ++i) l.records[i].offset = l.bytes.params[i].offset;
  return l;
}

void encode_frozen_record(const float* values, const FrozenRecord& r, void* out) {
  if (r.dtype == DType::kI8) {
    float* scales = static_cast<float*>(out);
    int8_t* q = reinterpret_cast<int8_t*>(scales + r.rows);
    quantize_int8_blockwise(values, static_cast<size_t>(r.numel), static_cast<size_t>(r.cols), q,
                            scales);
    return;
  }
  convert(values, DType::kF32, out, r.dtype, static_cast<size_t>(r.numel));
}

void decode_frozen_record(const void* bytes, const FrozenRecord& r, float* out) {
  if (r.dtype == DType::kI8) {
    const float* scales = static_cast<const float*>(bytes);
    const int8_t* q = reinterpret_cast<const int8_t*>(scales + r.rows);
    dequantize_int8_blockwise(q, scales, static_cast<size_t>(r.numel), static_cast<size_t>(r.cols),
                              out);
    return;
  }
  convert(bytes, r.dtype, out, DType::kF32, static_cast<size_t>(r.numel));
}

void convert_frozen_record(const void* bytes, const FrozenRecord& r, void* out, DType compute) {
  if (r.dtype != DType::kI8) {
    convert(bytes, r.dtype, out, compute, static_cast<size_t>(r.numel));
    return;
  }
  // One row at a time through an fp32 tile: q * scale in fp32, rounded once to the compute dtype.
  const float* scales = static_cast<const float*>(bytes);
  const int8_t* q = reinterpret_cast<const int8_t*>(scales + r.rows);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(r.cols));
  const size_t esize = dtype_size(compute);
  for (int64_t i = 0; i < r.rows; ++i) {
    dequantize_int8_blockwise(q + i * r.cols, scales + i, static_cast<size_t>(r.cols),
                              static_cast<size_t>(r.cols), row.data());
    convert(row.data(), DType::kF32, static_cast<char*>(out) + i * r.cols * esize, compute,
            static_cast<size_t>(r.cols));
  }
}

}  // namespace zs
