// The probe kernel and its launcher. Kept free of fmt/zeroshard headers so nvcc compiles only
// CUDA code; cuda_probe.cc turns errors into zs::Error.
#include <cuda_runtime.h>

namespace zs::detail {

__global__ void probe_kernel(int* out, int value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = value;
}

// Launches probe_kernel<<<1, 1, 0, stream>>>; returns the launch error.
cudaError_t launch_probe_kernel(int* out, int value, cudaStream_t stream) {
  probe_kernel<<<1, 1, 0, stream>>>(out, value);
  return cudaGetLastError();
}

}  // namespace zs::detail
