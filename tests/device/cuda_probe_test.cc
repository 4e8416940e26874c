#include "device/cuda/cuda_probe.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/error.h"

namespace zs {
namespace {

TEST(CudaProbe, RuntimeVersionNeedsNoDevice) {
  const std::string v = cuda_runtime_version();
  std::printf("CUDA runtime %s, %d device(s)\n", v.c_str(), cuda_device_count());
  EXPECT_NE(v, "unknown");
  EXPECT_NE(v.find('.'), std::string::npos);
}

TEST(CudaProbe, KernelRuns) {
  const int count = cuda_device_count();
  ASSERT_GE(count, 0);
  if (count == 0) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(cuda_run_probe_kernel(0), kCudaProbeValue);
  EXPECT_THROW(cuda_run_probe_kernel(count), Error);
}

}  // namespace
}  // namespace zs
