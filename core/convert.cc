#include "core/convert.h"

#include <cstring>

#include "core/convert_kernels.h"
#include "core/error.h"

namespace zs {
namespace detail {

void fp32_to_bf16_scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16_bits(src[i]);
}
void bf16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_fp32(src[i]);
}
void fp32_to_fp16_scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16_bits(src[i]);
}
void fp16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fp16_bits_to_fp32(src[i]);
}

}  // namespace detail

namespace {

using detail::ConvertKernels;

const ConvertKernels kScalar{detail::fp32_to_bf16_scalar,
                             detail::bf16_to_fp32_scalar,
                             detail::fp32_to_fp16_scalar,
                             detail::fp16_to_fp32_scalar,
                             "scalar",
                             "scalar"};
const ConvertKernels kAvx2{detail::fp32_to_bf16_avx2,
                           detail::bf16_to_fp32_avx2,
                           detail::fp32_to_fp16_avx2,
                           detail::fp16_to_fp32_avx2,
                           "avx2+f16c",
                           "avx2+f16c"};
const ConvertKernels kAvx512{detail::fp32_to_bf16_avx512,
                             detail::bf16_to_fp32_avx512,
                             detail::fp32_to_fp16_avx512,
                             detail::fp16_to_fp32_avx512,
                             "avx512f",
                             "avx512f"};
const ConvertKernels kAvx512Bf16{detail::fp32_to_bf16_avx512bf16,
                                 detail::bf16_to_fp32_avx512,
                                 detail::fp32_to_fp16_avx512,
                                 detail::fp16_to_fp32_avx512,
                                 "avx512f",
                                 "avx512bf16"};

const ConvertKernels& kernels_at(SimdLevel level) {
  ZS_CHECK(simd_level_supported(level), ErrorCode::kUnsupported,
           "convert: SIMD level {} is not supported by this CPU", simd_level_name(level));
  switch (level) {
    case SimdLevel::kScalar:
      return kScalar;
    case SimdLevel::kAvx2:
      return kAvx2;
    case SimdLevel::kAvx512:
      return cpu_features().avx512bf16 ? kAvx512Bf16 : kAvx512;
  }
  return kScalar;
}

const ConvertKernels& active_kernels() {
  static const ConvertKernels& k = kernels_at(active_simd_level());
  return k;
}

bool is16(DType t) { return t == DType::kF16 || t == DType::kBF16; }

void check_dtypes(DType st, DType dt) {
  ZS_CHECK((st == DType::kF32 || is16(st)) && (dt == DType::kF32 || is16(dt)),
           ErrorCode::kInvalidArgument, "convert: unsupported dtypes {} -> {}", dtype_name(st),
           dtype_name(dt));
}

void convert_with(const ConvertKernels& k, const void* src, DType st, void* dst, DType dt,
                  size_t n) {
  check_dtypes(st, dt);
  if (n == 0) return;
  if (st == dt) {
    std::memmove(dst, src, n * dtype_size(st));
    return;
  }
  const auto* s16 = static_cast<const uint16_t*>(src);
  auto* d16 = static_cast<uint16_t*>(dst);
  if (st == DType::kF32) {
    const auto* s = static_cast<const float*>(src);
    (dt == DType::kBF16 ? k.fp32_to_bf16 : k.fp32_to_fp16)(s, d16, n);
    return;
  }
  if (dt == DType::kF32) {
    (st == DType::kBF16 ? k.bf16_to_fp32 : k.fp16_to_fp32)(s16, static_cast<float*>(dst), n);
    return;
  }
  // fp16 <-> bf16 through fp32 in cache-sized chunks: the same bits as element-wise
  // store_from_fp32(load_as_fp32(...)), since widening is exact.
  const detail::WidenFn widen = st == DType::kBF16 ? k.bf16_to_fp32 : k.fp16_to_fp32;
  const detail::NarrowFn narrow = dt == DType::kBF16 ? k.fp32_to_bf16 : k.fp32_to_fp16;
  constexpr size_t kChunk = 2048;
  alignas(64) float tmp[kChunk];
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = n - i < kChunk ? n - i : kChunk;
    widen(s16 + i, tmp, m);
    narrow(tmp, d16 + i, m);
  }
}

}  // namespace

void fp32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  active_kernels().fp32_to_bf16(src, dst, n);
}
void bf16_to_fp32(const uint16_t* src, float* dst, size_t n) {
  active_kernels().bf16_to_fp32(src, dst, n);
}
void fp32_to_fp16(const float* src, uint16_t* dst, size_t n) {
  active_kernels().fp32_to_fp16(src, dst, n);
}
void fp16_to_fp32(const uint16_t* src, float* dst, size_t n) {
  active_kernels().fp16_to_fp32(src, dst, n);
}

void convert(const void* src, DType st, void* dst, DType dt, size_t n) {
  convert_with(active_kernels(), src, st, dst, dt, n);
}

void convert_at(SimdLevel level, const void* src, DType st, void* dst, DType dt, size_t n) {
  convert_with(kernels_at(level), src, st, dst, dt, n);
}

std::string convert_path_name(DType st, DType dt) {
  check_dtypes(st, dt);
  if (st == dt) return "copy";
  const ConvertKernels& k = active_kernels();
  const std::string to_dst = dt == DType::kBF16 ? k.fp32_to_bf16_name : k.name;
  if (st == DType::kF32) return to_dst;
  if (dt == DType::kF32) return k.name;
  return k.name + (">" + to_dst);
}

}  // namespace zs
