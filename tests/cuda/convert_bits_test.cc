// The device conversions (runtime/cuda/kernels/convert_bits.h), compiled for the host, against
// runtime/core/convert.h on every input: all 2^16 bf16 and fp16 patterns widened, all 2^32 fp32
// patterns narrowed to both. Pure host code: runs (and must pass) without a GPU. The kernels
// compile the same source for the device, so a GPU run of cuda_device_ops_test then only has to
// show that nvcc's device build agrees with its host build.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>

#include "runtime/core/convert.h"
#include "runtime/cuda/kernels/convert_bits.h"

namespace zs {
namespace {

TEST(ConvertBits, Every16BitPatternWidensAsConvertH) {
  int wrong = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto x = static_cast<uint16_t>(h);
    const uint32_t bf = std::bit_cast<uint32_t>(gpu::bits::bf16_to_fp32(x));
    const uint32_t f16 = std::bit_cast<uint32_t>(gpu::bits::fp16_to_fp32(x));
    if (bf != std::bit_cast<uint32_t>(bf16_bits_to_fp32(x)) && wrong++ < 5) {
      ADD_FAILURE() << "bf16 0x" << std::hex << h;
    }
    if (f16 != std::bit_cast<uint32_t>(fp16_bits_to_fp32(x)) && wrong++ < 5) {
      ADD_FAILURE() << "fp16 0x" << std::hex << h;
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(ConvertBits, EveryFp32PatternNarrowsAsConvertH) {
  uint64_t wrong16 = 0, wrongbf = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); ++u) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(u));
    if (gpu::bits::fp32_to_fp16(f) != fp32_to_fp16_bits(f) && wrong16++ < 5) {
      ADD_FAILURE() << "fp16 of 0x" << std::hex << u;
    }
    if (gpu::bits::fp32_to_bf16(f) != fp32_to_bf16_bits(f) && wrongbf++ < 5) {
      ADD_FAILURE() << "bf16 of 0x" << std::hex << u;
    }
  }
  std::printf("fp32 -> fp16 mismatches %llu, fp32 -> bf16 mismatches %llu of 2^32\n",
              static_cast<unsigned long long>(wrong16), static_cast<unsigned long long>(wrongbf));
  EXPECT_EQ(wrong16, 0u);
  EXPECT_EQ(wrongbf, 0u);
}

}  // namespace
}  // namespace zs
