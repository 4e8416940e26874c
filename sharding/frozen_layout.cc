#include "sharding/frozen_layout.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <omp.h>

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

namespace {

// Copies the part of src, which holds record bytes [src_begin, src_begin + n), that falls in
// [begin, end) to out (which holds record bytes [begin, end)).
void copy_overlap(const void* src, int64_t src_begin, int64_t n, int64_t begin, int64_t end,
                  void* out) {
  const int64_t b = std::max(begin, src_begin), e = std::min(end, src_begin + n);
  if (b >= e) return;
  std::memcpy(static_cast<char*>(out) + (b - begin),
              static_cast<const char*>(src) + (b - src_begin), static_cast<size_t>(e - b));
}

constexpr int64_t kPieceElems = int64_t{1} << 16;

// Runs body(p) for p in [0, pieces) on up to `threads` OpenMP threads, which compute under the
// caller's MXCSR (rounding, FTZ/DAZ) as the caller's own thread would.
template <typename Body>
void for_pieces(int64_t pieces, int threads, Body&& body) {
  if (threads <= 0) threads = omp_get_max_threads();
  threads = static_cast<int>(std::min<int64_t>(threads, pieces));
  if (threads <= 1 || omp_in_parallel()) {
    for (int64_t p = 0; p < pieces; ++p) body(p);
    return;
  }
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
#endif
#pragma omp parallel num_threads(threads)
  {
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(csr);
#endif
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < pieces; ++p) body(p);
#if defined(__x86_64__)
    _mm_setcsr(saved);
#endif
  }
}

// Rows [r0, r1) of an int8 record: drawn and quantized a piece of rows at a time, and the bytes
// of their scales and values that fall in [begin, end) copied out.
void encode_rows(const FrozenRecord& r, int64_t r0, int64_t r1, int64_t begin, int64_t end,
                 const FrozenValues& values, void* out, int threads, float* row_scales = nullptr) {
  const int64_t per = std::max<int64_t>(1, kPieceElems / r.cols);
  for_pieces((r1 - r0 + per - 1) / per, threads, [&](int64_t p) {
    thread_local std::vector<float> x, scales;
    thread_local std::vector<int8_t> q;
    const int64_t a = r0 + p * per, rows = std::min(per, r1 - a), n = rows * r.cols;
    x.resize(static_cast<size_t>(n));
    q.resize(static_cast<size_t>(n));
    scales.resize(static_cast<size_t>(rows));
    values(a * r.cols, n, x.data());
    quantize_int8_rows(x.data(), static_cast<size_t>(rows), static_cast<size_t>(r.cols), q.data(),
                       scales.data());
    copy_overlap(scales.data(), 4 * a, 4 * rows, begin, end, out);
    copy_overlap(q.data(), 4 * r.rows + a * r.cols, n, begin, end, out);
    if (row_scales) std::copy(scales.begin(), scales.begin() + rows, row_scales + a);
  });
}

}  // namespace

void encode_frozen_range(const FrozenRecord& r, int64_t begin, int64_t end,
                         const FrozenValues& values, void* out, int threads) {
  ZS_CHECK(0 <= begin && begin <= end && end <= r.bytes, ErrorCode::kInvalidArgument,
           "encode_frozen_range: bytes [{}, {}) are not in a record of {} bytes", begin, end,
           r.bytes);
  if (begin == end) return;
  if (r.dtype == DType::kI8) {
    // The rows whose scales the range overlaps, and the rows whose values it overlaps.
    const int64_t sb = 4 * r.rows;
    int64_t s0 = 0, s1 = 0, v0 = 0, v1 = 0;
    if (begin < sb) {
      s0 = begin / 4;
      s1 = (std::min(end, sb) + 3) / 4;
    }
    if (end > sb) {
      v0 = (std::max(begin, sb) - sb) / r.cols;
      v1 = (end - sb + r.cols - 1) / r.cols;
    }
    if (s0 < s1 && v0 < v1 && s0 <= v1 && v0 <= s1) {  // one run of rows covers both
      encode_rows(r, std::min(s0, v0), std::max(s1, v1), begin, end, values, out, threads);
      return;
    }
    if (s0 < s1) encode_rows(r, s0, s1, begin, end, values, out, threads);
    if (v0 < v1) encode_rows(r, v0, v1, begin, end, values, out, threads);
    return;
  }
  const int64_t es = static_cast<int64_t>(dtype_size(r.dtype));
  const int64_t e0 = begin / es, e1 = (end + es - 1) / es;
  for_pieces((e1 - e0 + kPieceElems - 1) / kPieceElems, threads, [&](int64_t p) {
    thread_local std::vector<float> x;
    thread_local std::vector<char> enc;
    const int64_t a = e0 + p * kPieceElems, n = std::min(kPieceElems, e1 - a);
    x.resize(static_cast<size_t>(n));
    enc.resize(static_cast<size_t>(n * es));
    values(a, n, x.data());
    convert(x.data(), DType::kF32, enc.data(), r.dtype, static_cast<size_t>(n));
    copy_overlap(enc.data(), a * es, n * es, begin, end, out);
  });
}

void encode_int8_values(const FrozenRecord& r, int64_t begin, int64_t end,
                        const FrozenValues& values, void* out, float* row_scales, int threads) {
  ZS_CHECK(
      r.dtype == DType::kI8 && r.rows > 0 && 4 * r.rows <= begin && begin <= end && end <= r.bytes,
      ErrorCode::kInvalidArgument,
      "encode_int8_values: bytes [{}, {}) are not value bytes of an int8 record of {} bytes", begin,
      end, r.bytes);
  if (begin == end) return;
  const int64_t sb = 4 * r.rows;
  const int64_t v0 = (begin - sb) / r.cols, v1 = (end - sb + r.cols - 1) / r.cols;
  encode_rows(r, v0, v1, begin, end, values, out, threads, row_scales);
}

ElementRange frozen_elements_of_bytes(const FrozenRecord& r, int64_t begin, int64_t end) {
  ZS_CHECK(0 <= begin && begin <= end && end <= r.bytes, ErrorCode::kInvalidArgument,
           "frozen_elements_of_bytes: bytes [{}, {}) are not in a record of {} bytes", begin, end,
           r.bytes);
  if (begin == end) return {};
  if (r.dtype == DType::kI8) {
    // Scales are rows [begin / 4, ...), values rows [(begin - 4 rows) / cols, ...): the hull.
    const int64_t sb = 4 * r.rows;
    int64_t lo = r.rows, hi = 0;
    if (begin < sb) {
      lo = std::min(lo, begin / 4);
      hi = std::max(hi, (std::min(end, sb) + 3) / 4);
    }
    if (end > sb) {
      lo = std::min(lo, (std::max(begin, sb) - sb) / r.cols);
      hi = std::max(hi, (end - sb + r.cols - 1) / r.cols);
    }
    return {lo * r.cols, hi * r.cols};
  }
  const int64_t es = static_cast<int64_t>(dtype_size(r.dtype));
  return {begin / es, (end + es - 1) / es};
}

void decode_frozen_record(const void* bytes, const FrozenRecord& r, float* out, int threads) {
  if (r.dtype == DType::kI8) {
    // dequantize_int8_rows into fp32: the products q * scale of dequantize_int8_blockwise, on the
    // vector path.
    const float* scales = static_cast<const float*>(bytes);
    const int8_t* q = reinterpret_cast<const int8_t*>(scales + r.rows);
    const int64_t per = std::max<int64_t>(1, kPieceElems / r.cols);
    for_pieces((r.rows + per - 1) / per, threads, [&](int64_t p) {
      const int64_t a = p * per, rows = std::min(per, r.rows - a);
      dequantize_int8_rows(q + a * r.cols, scales + a, static_cast<size_t>(rows),
                           static_cast<size_t>(r.cols), out + a * r.cols, DType::kF32);
    });
    return;
  }
  const size_t es = dtype_size(r.dtype);
  for_pieces((r.numel + kPieceElems - 1) / kPieceElems, threads, [&](int64_t p) {
    const int64_t a = p * kPieceElems, n = std::min(kPieceElems, r.numel - a);
    convert(static_cast<const char*>(bytes) + static_cast<size_t>(a) * es, r.dtype, out + a,
            DType::kF32, static_cast<size_t>(n));
  });
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
