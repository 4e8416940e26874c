// The measured GEMM rates (nn/gemm_rate.h): a real measurement gives positive rates at the shape
// asked and the calling team's threads; the advice names the slower dtype only beyond the margin,
// with the ratio; a bad shape is refused.
#include <cmath>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <omp.h>

#include "core/error.h"
#include "nn/gemm_rate.h"
#include "nn/threads.h"

namespace zs::nn {
namespace {

TEST(GemmRate, MeasuresBothDtypesAtTheShape) {
  ThreadScope team(1);
  const GemmRates r = measure_gemm_rates(64, 96, 80, 0.001, 2);
  EXPECT_EQ(r.m, 64);
  EXPECT_EQ(r.k, 96);
  EXPECT_EQ(r.n, 80);
  EXPECT_EQ(r.threads, 1);
  EXPECT_TRUE(std::isfinite(r.fp32_gflops) && r.fp32_gflops > 0.0) << r.fp32_gflops;
  EXPECT_TRUE(std::isfinite(r.bf16_gflops) && r.bf16_gflops > 0.0) << r.bf16_gflops;
}

TEST(GemmRate, AdviceOnlyForTheSlowerDtypeBeyondTheMargin) {
  GemmRates r;
  r.m = 1024;
  r.k = 256;
  r.n = 688;
  r.threads = 2;
  r.fp32_gflops = 280.0;
  r.bf16_gflops = 140.0;
  const std::string head =
      "gemm rates here ([1024 x 256] x [256 x 688], 2 threads): fp32 280.0 GFLOP/s, bf16 140.0";
  EXPECT_TRUE(slower_dtype(r, "bf16"));
  EXPECT_FALSE(slower_dtype(r, "fp32"));
  EXPECT_FALSE(slower_dtype(r, "fp16"));
  EXPECT_EQ(describe_gemm_rates(r, "bf16"),
            head +
                ": bf16 products are 2.00x slower than fp32 on this CPU; --dtype fp32 trains "
                "faster here (bf16 halves the parameter and activation bytes)");
  EXPECT_EQ(describe_gemm_rates(r, "fp32"), head);
  EXPECT_EQ(describe_gemm_rates(r, "fp16"), head);
  // The other way round (AMX: bf16 far ahead).
  std::swap(r.fp32_gflops, r.bf16_gflops);
  EXPECT_TRUE(slower_dtype(r, "fp32"));
  EXPECT_NE(describe_gemm_rates(r, "fp32").find(
                ": fp32 products are 2.00x slower than bf16 on this CPU; --dtype bf16 "
                "trains faster here"),
            std::string::npos);
  // Within the margin (15% by default): no advice either way.
  r.fp32_gflops = 100.0;
  r.bf16_gflops = 86.0;
  EXPECT_FALSE(slower_dtype(r, "bf16"));
  EXPECT_FALSE(slower_dtype(r, "fp32"));
  EXPECT_TRUE(slower_dtype(r, "bf16", 0.1));
}

TEST(GemmRate, BadShapeRefused) {
  try {
    measure_gemm_rates(0, 4, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("measure_gemm_rates: shape [0 x 4] x [4 x 4] has a "
                                         "non-positive dimension"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zs::nn
