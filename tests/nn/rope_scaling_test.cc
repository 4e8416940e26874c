// Rope scaling's inverse frequencies (nn/rope_scaling.h): values worked out by hand for a small
// table, Llama-3.1's table bit for bit against transformers' _compute_llama3_parameters (its fp32
// tensor operations, run once in torch to write the constants below), the rotary kernels turning by
// the scaled frequencies, and the text form --rope-scaling and the checkpoints use.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/kernels.h"
#include "nn/rope_scaling.h"

namespace zs::nn {
namespace {

RopeScaling llama3(double factor, double low, double high, int original) {
  return {RopeScalingKind::kLlama3, factor, low, high, original};
}

std::string error_of(const std::string& text) {
  try {
    parse_rope_scaling(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// hd 8, theta 10^4: inv_freq 10^-i, wavelengths 2 pi 10^i = 6.28, 62.8, 628, 6283. llama3 with
// factor 8, low 1, high 4, original 1024 bounds them at 1024 / 4 = 256 and 1024 / 1 = 1024: the
// first two are kept, the last divided by 8, the third blended with s = (1024 / 628.3 - 1) / 3.
TEST(RopeScaling, SmallTableByHand) {
  const std::vector<float> plain = rope_inv_freq(8, 10000.0f);
  ASSERT_EQ(plain.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(plain[i], std::pow(10.0f, -i)) << i;
  const std::vector<float> l3 = rope_inv_freq(8, 10000.0f, llama3(8, 1, 4, 1024));
  EXPECT_EQ(l3[0], plain[0]);
  EXPECT_EQ(l3[1], plain[1]);
  EXPECT_EQ(l3[3], plain[3] / 8.0f);
  const double s = (1024.0 / (2 * M_PI / 0.01) - 1.0) / 3.0;  // 0.2099155
  const double blended = (1 - s) * 0.01 / 8 + s * 0.01;       // 0.0030867610
  EXPECT_NEAR(l3[2], blended, 1e-6 * blended);
  EXPECT_NEAR(l3[2], 0.003086761, 1e-9);
  // linear: every frequency over factor (a power of two: exactly).
  const std::vector<float> lin = rope_inv_freq(8, 10000.0f, {RopeScalingKind::kLinear, 4.0});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lin[i], plain[i] / 4.0f) << i;
}

// Llama-3.1-8B's head dim 128 at half size (hd 64), theta 500000, llama3 factor 8, low 1, high 4,
// original 8192: transformers' fp32 values (torch, _compute_llama3_parameters' operations), bit for
// bit. Entries 15-17 are the blended band, the ones rounding could move.
TEST(RopeScaling, Llama31TableMatchesTransformersBitForBit) {
  const uint32_t want[32] = {0x3f800000, 0x3f29e1c6, 0x3ee177bc, 0x3e959ee3, 0x3e4693b0, 0x3e03c6a0,
                             0x3daee4ad, 0x3d681e67, 0x3d1a08c8, 0x3ccc6f49, 0x3c87a9c3, 0x3c340d6d,
                             0x3beef74f, 0x3b9e9402, 0x3b527720, 0x3ab3d11d, 0x3a0995d2, 0x393b2dd2,
                             0x38a3418d, 0x3858ac81, 0x380fc8f8, 0x37bed4f4, 0x377d45c3, 0x3728126b,
                             0x36df10c4, 0x369406cb, 0x36447610, 0x36025f34, 0x35ad07a7, 0x3565a54d,
                             0x351864a7, 0x34ca41b0};
  const std::vector<float> got = rope_inv_freq(64, 500000.0f, llama3(8, 1, 4, 8192));
  ASSERT_EQ(got.size(), 32u);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), want[i]) << "inv_freq[" << i << "] = " << got[i];
}

// The kernels turn by the scaled frequencies: with linear factor 4 the row at position 4k turns as
// the unscaled row at position k (t inv / 4 = (t / 4) inv exactly).
TEST(RopeScaling, KernelsUseTheScaledFrequencies) {
  const int T = 16, heads = 2, hd = 8, ld = heads * hd;
  std::vector<float> x(static_cast<size_t>(T) * ld);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
  std::vector<float> plain = x, lin = x;
  rope_forward(plain.data(), T, T, heads, hd, ld, 10000.0f);
  rope_forward(lin.data(), T, T, heads, hd, ld, 10000.0f, {RopeScalingKind::kLinear, 4.0});
  for (int k = 0; k < T / 4; ++k) {
    // Row 4k's input placed at position k and turned without scaling.
    std::vector<float> at_k(static_cast<size_t>(T) * ld, 0.0f);
    std::copy(x.begin() + 4 * k * ld, x.begin() + (4 * k + 1) * ld, at_k.begin() + k * ld);
    rope_forward(at_k.data(), T, T, heads, hd, ld, 10000.0f);
    for (int j = 0; j < ld; ++j)
      EXPECT_EQ(lin[4 * k * ld + j], at_k[k * ld + j]) << "position " << 4 * k << " column " << j;
  }
  EXPECT_NE(plain[4 * ld + 1], lin[4 * ld + 1]);  // position 4 does turn differently
  // Backward is the transpose with the same table: forward then backward is the identity.
  std::vector<float> back = lin;
  rope_backward(back.data(), T, T, heads, hd, ld, 10000.0f, {RopeScalingKind::kLinear, 4.0});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-6f) << i;
}

TEST(RopeScaling, TextFormRoundTripsAndRefusesNamingTheField) {
  for (const char* text : {"none", "linear:factor=4", "linear:factor=2.5",
                           "llama3:factor=32,low=1,high=4,original=8192",
                           "llama3:factor=8,low=0.5,high=4,original=8192"}) {
    EXPECT_EQ(rope_scaling_text(parse_rope_scaling(text)), text);
  }
  EXPECT_EQ(parse_rope_scaling("llama3:original=8192,high=4,low=1,factor=32"),
            llama3(32, 1, 4, 8192));
  EXPECT_EQ(parse_rope_scaling("none"), RopeScaling{});
  EXPECT_NE(error_of("yarn:factor=4").find("'yarn:factor=4' is not one of none, linear"),
            std::string::npos);
  EXPECT_NE(error_of("linear").find("'linear' lacks factor="), std::string::npos);
  EXPECT_NE(error_of("linear:factor=x").find("factor=x is not a number"), std::string::npos);
  EXPECT_NE(error_of("linear:factor=0.5").find("linear factor 0.5 must be finite and at least 1"),
            std::string::npos);
  EXPECT_NE(error_of("linear:factor=2,low=1").find("'low=1' in 'linear:factor=2,low=1' is not one"),
            std::string::npos);
  EXPECT_NE(error_of("llama3:factor=8,low=1,high=4").find("lacks original="), std::string::npos);
  EXPECT_NE(error_of("llama3:factor=8,low=4,high=1,original=8192")
                .find("high_freq_factor 1 must be finite and above low_freq_factor 4"),
            std::string::npos);
  EXPECT_NE(error_of("llama3:factor=8,low=1,high=4,original=81.5").find("original=81.5"),
            std::string::npos);
  EXPECT_NE(error_of("linear:factor=2,factor=3").find("factor is given twice"), std::string::npos);
}

}  // namespace
}  // namespace zs::nn
