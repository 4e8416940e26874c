// The scalar conversions between fp32 and bf16/fp16 (round to nearest even; the NaN, infinity,
// overflow and subnormal results documented in core/convert.h), in one place for the host
// and the device: convert.h's scalar functions are these, and the CUDA kernels
// (device/cuda/kernels) use them rather than the cvt instructions behind
// __float2half_rn/__float2bfloat16_rn/__half2float, which give the same result for every non-NaN
// input but are not specified to keep a NaN's sign and payload. Integer operations only, apart
// from one exact float product (__fmul_rn on the device). C++17, no CUDA header needed on the
// host. Stateless.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZS_HD __host__ __device__ __forceinline__
#else
#define ZS_HD inline
#endif

namespace zs::bits {

ZS_HD uint32_t float_to_u32(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ZS_HD float u32_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// As zs::fp32_to_bf16_bits.
ZS_HD uint16_t fp32_to_bf16(float f) {
  uint32_t x = float_to_u32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// As zs::bf16_bits_to_fp32.
ZS_HD float bf16_to_fp32(uint16_t h) { return u32_to_float(static_cast<uint32_t>(h) << 16); }

// As zs::fp32_to_fp16_bits.
ZS_HD uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_to_u32(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign |
                                 (ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : 0x7c00u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (ax >= 0x38800000u) {  // normal fp16: rebias exponent by 112, round 23 -> 10 mantissa bits
    uint32_t r = ax - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25: zero (the tie 2^-25 goes to even, zero)
  // Subnormal fp16: count units of 2^-24, round to nearest even.
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// As zs::fp16_bits_to_fp32 (exact; a NaN keeps its sign and payload).
ZS_HD float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (static_cast<uint32_t>(h) >> 10) & 0x1fu;
  const uint32_t m = static_cast<uint32_t>(h) & 0x3ffu;
  if (e == 0x1fu) return u32_to_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    // m * 2^-24, exact. The device multiply is the rounded intrinsic so that nothing can fuse it
    // with the caller's arithmetic.
#if defined(__CUDA_ARCH__)
    const float v = __fmul_rn(static_cast<float>(m), 5.9604644775390625e-08f);
#else
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
#endif
    return sign ? -v : v;
  }
  return u32_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace zs::bits

#undef ZS_HD
