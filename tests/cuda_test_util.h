// Helpers for the GPU tests: the skip rule, device arrays over the caching allocator, copies and
// the max-difference report the tests print.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "core/buffer.h"
#include "device/cuda/cuda_allocator.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_probe.h"

// Skips the test (ctest's SKIP_REGULAR_EXPRESSION matches the message) without a device.
#define ZS_REQUIRE_CUDA()                                                 \
  do {                                                                    \
    if (::zs::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Multi-rank GPU tests: skips without one device per rank. Every rank decides alike (same node,
// same device count), so no rank is left waiting in a collective.
#define ZS_REQUIRE_GPU_PER_RANK()                                                     \
  do {                                                                                \
    ZS_REQUIRE_CUDA();                                                                \
    int world_ = 1;                                                                   \
    MPI_Comm_size(MPI_COMM_WORLD, &world_);                                           \
    if (::zs::cuda_device_count() < world_) GTEST_SKIP() << "needs one GPU per rank"; \
  } while (0)

namespace zs::test {

// A caching allocator for the calling thread's current device (one per device, kept for the
// process: the tests exercise the cache as the runtime does).
inline CudaCachingAllocator& device_alloc() {
  static std::vector<std::unique_ptr<CudaCachingAllocator>> allocs(16);
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  if (allocs.at(static_cast<size_t>(dev)) == nullptr) {
    allocs[static_cast<size_t>(dev)] = std::make_unique<CudaCachingAllocator>(dev);
  }
  return *allocs[static_cast<size_t>(dev)];
}

// A device array of n elements of T (zero-filled), uploaded from / downloaded to std::vector.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n)
      : n_(n), buf_(n * sizeof(T), MemCategory::kOther, nullptr, &device_alloc()) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  T* get() { return buf_.as<T>(); }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    cuda_check(cudaMemcpy(buf_.data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
               "upload");
  }
  // Synchronizes the device first (a test, not a step).
  std::vector<T> download() {
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<T> host(n_);
    cuda_check(cudaMemcpy(host.data(), buf_.data(), n_ * sizeof(T), cudaMemcpyDeviceToHost),
               "download");
    return host;
  }

 private:
  size_t n_;
  Buffer buf_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Largest |a - b| / (atol + rtol * |b|) over the elements (<= 1 passes); prints the max absolute
// difference as the tests of llm.c do.
inline double check_close(const char* what, const std::vector<float>& got,
                          const std::vector<float>& want, double atol, double rtol) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0.0, max_abs = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double r = std::isfinite(d) ? d / (atol + rtol * std::fabs(want[i])) : INFINITY;
    max_abs = std::max(max_abs, d);
    if (!(r <= worst)) {
      worst = r;
      at = i;
    }
  }
  std::printf("%-36s max |diff| %.3e (worst ratio %.3f at %zu)\n", what, max_abs, worst, at);
  EXPECT_LE(worst, 1.0) << what << ": element " << at << " got " << got[at] << " want " << want[at];
  return max_abs;
}

}  // namespace zs::test
