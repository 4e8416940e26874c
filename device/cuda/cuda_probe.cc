#include "device/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace zs {
namespace detail {
cudaError_t launch_probe_kernel(int* out, int value, cudaStream_t stream);
}  // namespace detail

namespace {

void check(cudaError_t err, const char* what, int device) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear the (non-sticky) error so later calls start clean
  fail(ErrorCode::kInternal, "cuda probe: {} failed on device {}: {} ({})", what, device,
       cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return count;
}

std::string cuda_runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

int cuda_run_probe_kernel(int device) {
  const int count = cuda_device_count();
  ZS_CHECK(device >= 0 && device < count, ErrorCode::kUnsupported,
           "cuda probe: device {} requested, {} CUDA device(s) present", device, count);
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* mem = nullptr;
  check(cudaMalloc(&mem, sizeof(int)), "cudaMalloc", device);
  int* d_out = static_cast<int*>(mem);
  int result = 0;
  cudaError_t err = cudaMemset(d_out, 0, sizeof(int));
  if (err == cudaSuccess) err = detail::launch_probe_kernel(d_out, kCudaProbeValue, nullptr);
  // Host sync on purpose: this is a probe, not a step; the copy waits for the kernel.
  if (err == cudaSuccess) err = cudaMemcpy(&result, d_out, sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(d_out);
  check(err, "probe kernel launch/copy", device);
  return result;
}

}  // namespace zs
