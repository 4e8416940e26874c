// Element types the runtime moves and computes in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zs {

// kF64 exists for small reductions (norms, flags); tensors use the first five.
enum class DType : uint8_t { kF32, kF16, kBF16, kI8, kU8, kF64 };

// Bytes per element: 4, 2, 2, 1, 1, 8.
size_t dtype_size(DType dt);
// "fp32", "fp16", "bf16", "int8", "uint8", "fp64".
std::string_view dtype_name(DType dt);
// Parses the names above (also "float32", "float16", "bfloat16"); throws
// zs::Error(kInvalidArgument) naming the text and the accepted names.
DType parse_dtype(std::string_view name);
// True for fp32, fp16, bf16, fp64: the types reductions are defined on.
bool dtype_is_float(DType dt);

// The address of element `elems` of a buffer of `dt` elements starting at p.
inline const void* element_at(const void* p, int64_t elems, DType dt) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}
inline void* element_at(void* p, int64_t elems, DType dt) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace zs
