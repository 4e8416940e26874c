#include "runtime/core/convert.h"

#include <cstring>

#include "runtime/core/error.h"

namespace zs {

// Scalar paths; a helper replaces these with run-time dispatched vector paths.
void fp32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16_bits(src[i]);
}
void bf16_to_fp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_fp32(src[i]);
}
void fp32_to_fp16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16_bits(src[i]);
}
void fp16_to_fp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp16_bits_to_fp32(src[i]);
}

void convert(const void* src, DType st, void* dst, DType dt, size_t n) {
  auto is16 = [](DType t) { return t == DType::kF16 || t == DType::kBF16; };
  ZS_CHECK((st == DType::kF32 || is16(st)) && (dt == DType::kF32 || is16(dt)),
           ErrorCode::kInvalidArgument, "convert: unsupported dtypes {} -> {}", dtype_name(st),
           dtype_name(dt));
  if (st == dt) {
    std::memmove(dst, src, n * dtype_size(st));
    return;
  }
  auto* s16 = static_cast<const uint16_t*>(src);
  auto* d16 = static_cast<uint16_t*>(dst);
  if (st == DType::kF32) {
    auto* s = static_cast<const float*>(src);
    if (dt == DType::kBF16) fp32_to_bf16(s, d16, n); else fp32_to_fp16(s, d16, n);
    return;
  }
  if (dt == DType::kF32) {
    auto* d = static_cast<float*>(dst);
    if (st == DType::kBF16) bf16_to_fp32(s16, d, n); else fp16_to_fp32(s16, d, n);
    return;
  }
  // fp16 <-> bf16 through fp32, one element at a time (rare path).
  for (size_t i = 0; i < n; ++i) store_from_fp32(dst, dt, i, load_as_fp32(src, st, i));
}

}  // namespace zs
