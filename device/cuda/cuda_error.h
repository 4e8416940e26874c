// Turning CUDA runtime errors into zs::Error. Host-side C++20 (compiled by g++); .cu files do not
// include it: their launchers return cudaError_t and callers pass it through cuda_check().
// Thread-safety: stateless.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace zs {

// Throws zs::Error(code) naming `what`, the current device and CUDA's error name and text when
// err != cudaSuccess. A non-sticky error is cleared first so later calls start clean.
inline void cuda_check(cudaError_t err, const char* what, ErrorCode code = ErrorCode::kInternal) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  int dev = -1;
  cudaGetDevice(&dev);
  fail(err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : code,
       "cuda: {} failed on device {}: {} ({})", what, dev, cudaGetErrorName(err),
       cudaGetErrorString(err));
}

}  // namespace zs
