// Rank-seeded data every rank can predict, and the reference reduction of the determinism
// contract (a fixed tree over the ranks, fp32 or fp64 accumulator, one rounding), for the
// collectives tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/communicator.h"
#include "core/convert.h"
#include "core/dtype.h"

namespace zs::test {

inline uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Rank r's input at global index g, exactly representable in dt (returned widened to double).
inline double input_value(DType dt, int r, size_t g, uint32_t seed) {
  const uint32_t h = mix(seed * 0x9e3779b9u ^
                         mix(static_cast<uint32_t>(r) * 0x85ebca6bu + static_cast<uint32_t>(g)));
  const uint32_t h2 = mix(h + 0x1234567u);
  switch (dt) {
    case DType::kI8:
      return static_cast<int8_t>(h & 0xff);
    case DType::kU8:
      return static_cast<uint8_t>(h & 0xff);
    case DType::kF64:
      return (static_cast<double>(h) + static_cast<double>(h2) / 4294967296.0) / 4294967296.0 *
                 200.0 -
             100.0;
    default: {
      const float f = static_cast<float>((h & 0xffffff) / 16777216.0 * 200.0 - 100.0);
      alignas(4) uint8_t tmp[4];
      store_from_fp32(tmp, dt, 0, f);
      return load_as_fp32(tmp, dt, 0);
    }
  }
}

inline void store_value(void* buf, DType dt, size_t i, double v) {
  switch (dt) {
    case DType::kI8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v);
      break;
    case DType::kU8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case DType::kF64:
      static_cast<double*>(buf)[i] = v;
      break;
    default:
      store_from_fp32(buf, dt, i, static_cast<float>(v));
      break;
  }
}

// buf[i] = rank r's input at global index first + i.
inline void fill(void* buf, DType dt, int r, size_t first, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i) store_value(buf, dt, i, input_value(dt, r, first + i, seed));
}

// The contract's tree over ranks [lo, hi) at global index g, in the accumulator type Acc: the
// split of reduction_tree_split(), written out again here so that the test does not read it
// from the code under test.
template <typename Acc>
Acc reference_tree(DType dt, ReduceOp op, int lo, int hi, size_t g, uint32_t seed) {
  if (hi - lo == 1) return static_cast<Acc>(input_value(dt, lo, g, seed));
  const int mid = lo + (hi - lo + 1) / 2;
  const Acc a = reference_tree<Acc>(dt, op, lo, mid, g, seed);
  const Acc x = reference_tree<Acc>(dt, op, mid, hi, g, seed);
  return op == ReduceOp::kMax ? ((x > a || x != x) ? x : a) : a + x;
}

// out[i] = the contract's reduction over ranks 0..n-1 (the tree above) of their inputs at global
// index first + i.
inline void reference(void* out, DType dt, ReduceOp op, int n, size_t first, size_t count,
                      uint32_t seed) {
  for (size_t i = 0; i < count; ++i) {
    if (dt == DType::kF64) {
      double acc = reference_tree<double>(dt, op, 0, n, first + i, seed);
      if (op == ReduceOp::kAvg) acc /= static_cast<double>(n);
      static_cast<double*>(out)[i] = acc;
    } else {
      float acc = reference_tree<float>(dt, op, 0, n, first + i, seed);
      if (op == ReduceOp::kAvg) acc /= static_cast<float>(n);
      store_from_fp32(out, dt, i, acc);
    }
  }
}

// Index of the first element whose bytes differ, or -1.
inline long first_mismatch(const void* a, const void* b, size_t count, DType dt) {
  const size_t e = dtype_size(dt);
  if (std::memcmp(a, b, count * e) == 0) return -1;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(a) + i * e, static_cast<const char*>(b) + i * e, e)) {
      return static_cast<long>(i);
    }
  }
  return -1;
}

}  // namespace zs::test
