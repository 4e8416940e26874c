#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

namespace zs::optim {
namespace {

TEST(LrSchedule, WarmupIsLinearFromZeroToLr) {
  LrSchedule s{1e-3f, 100, 1000, 0.1f};
  EXPECT_FLOAT_EQ(s.at(1), 1e-5f);
  EXPECT_FLOAT_EQ(s.at(50), 5e-4f);
  EXPECT_FLOAT_EQ(s.at(100), 1e-3f);
  for (int64_t t = 1; t < 100; ++t) EXPECT_LT(s.at(t), s.at(t + 1)) << t;
}

TEST(LrSchedule, CosineEndpointsMidpointAndMonotonicDecay) {
  LrSchedule s{1e-3f, 100, 1100, 0.1f};
  EXPECT_FLOAT_EQ(s.at(100), 1e-3f);                             // end of warm-up: peak
  EXPECT_NEAR(s.at(600), 1e-4f + 0.5f * (1e-3f - 1e-4f), 1e-9);  // half-way: the mean
  EXPECT_FLOAT_EQ(s.at(1100), 1e-4f);                            // lr * min_ratio
  EXPECT_FLOAT_EQ(s.at(5000), 1e-4f);                            // constant after
  for (int64_t t = 100; t < 1100; ++t) EXPECT_GE(s.at(t), s.at(t + 1)) << t;
  EXPECT_GT(s.at(101), s.at(1099));
}

TEST(LrSchedule, NoWarmupAndNoDecay) {
  LrSchedule cosine{2e-3f, 0, 10, 0.0f};
  EXPECT_FLOAT_EQ(cosine.at(0), 2e-3f);
  EXPECT_FLOAT_EQ(cosine.at(10), 0.0f);
  LrSchedule constant{2e-3f, 5, 0, 0.1f};  // total_steps 0: no decay after warm-up
  EXPECT_FLOAT_EQ(constant.at(5), 2e-3f);
  EXPECT_FLOAT_EQ(constant.at(1000000), 2e-3f);
}

}  // namespace
}  // namespace zs::optim
