// Internal to core: the per-level kernels behind the bulk conversions of convert.h.
// Every kernel gives the same bits as the scalar inline functions of convert.h for every input;
// the vector ones are compiled with per-function target attributes (convert_x86.cc) and must only
// be called when simd_level_supported() says the CPU has them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zs::detail {

using NarrowFn = void (*)(const float* src, uint16_t* dst, size_t n);
using WidenFn = void (*)(const uint16_t* src, float* dst, size_t n);

struct ConvertKernels {
  NarrowFn fp32_to_bf16;
  WidenFn bf16_to_fp32;
  NarrowFn fp32_to_fp16;
  WidenFn fp16_to_fp32;
  const char* name;               // implementation of the kernels, e.g. "avx512f"
  const char* fp32_to_bf16_name;  // of fp32_to_bf16, e.g. "avx512bf16"
};

// Defined in convert.cc: loops over the scalar inline functions.
void fp32_to_bf16_scalar(const float* src, uint16_t* dst, size_t n);
void bf16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n);
void fp32_to_fp16_scalar(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n);

// Defined in convert_x86.cc; on non-x86 builds these are never selected.
void fp32_to_bf16_avx2(const float* src, uint16_t* dst, size_t n);
void bf16_to_fp32_avx2(const uint16_t* src, float* dst, size_t n);
void fp32_to_fp16_avx2(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32_avx2(const uint16_t* src, float* dst, size_t n);
void fp32_to_bf16_avx512(const float* src, uint16_t* dst, size_t n);
void fp32_to_bf16_avx512bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_fp32_avx512(const uint16_t* src, float* dst, size_t n);
void fp32_to_fp16_avx512(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32_avx512(const uint16_t* src, float* dst, size_t n);

}  // namespace zs::detail
