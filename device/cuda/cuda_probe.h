// Proof that the CUDA toolchain compiles, links and runs: device count, runtime version and a
// probe kernel. Built only when CMake found the toolkit (ZS_HAVE_CUDA); code that must also build
// without CUDA does not include this header.
// Thread-safety: all functions may be called concurrently.
#pragma once

#include <string>

namespace zs {

// Number of CUDA devices this process can use; 0 when there is no device, no driver, or the driver
// is older than the runtime. Never throws.
int cuda_device_count();

// The CUDA runtime this library was linked against, "major.minor" (e.g. "13.0"). Needs no device.
std::string cuda_runtime_version();

// The value the probe kernel writes; cuda_run_probe_kernel() returns it when the kernel ran.
inline constexpr int kCudaProbeValue = 0x2a5eed;

// Launches a one-thread kernel on `device` that writes kCudaProbeValue into device memory, waits
// for it and returns the value read back. Throws zs::Error(kUnsupported) when the device does not
// exist, zs::Error(kInternal) naming the CUDA error when the launch or copy fails.
int cuda_run_probe_kernel(int device = 0);

}  // namespace zs
