// DeviceOps: the element-wise work the engine does on its own buffers, for one device.
//
// The engine never touches a parameter, gradient or optimizer-state byte with a host loop of its
// own: it allocates through allocator() and calls these. cpu_device_ops() runs them on the host
// (this is the CPU backend, and what every test in this repository runs); the CUDA backend
// (device/cuda/cuda_device_ops.h) enqueues kernels on its compute stream, the stream the model's
// kernels and the NCCL communicator are ordered against.
//
// Ordering: every call is ordered after the previous calls on the same object (stream order on
// CUDA; plain program order on the CPU). Calls that hand a value to the host (grad_stats,
// copy_to_host) wait for every earlier call except pending copy_to_host_async copies, which only
// wait_host_copies() and synchronize() wait for. synchronize() waits for all of it.
//
// Bitwise contract, on every device: convert() rounds as core/convert.h; accumulate()
// computes dst + src in fp32 and rounds once to dst's dtype; adamw() gives the bits of
// optim::adamw_reference ([Note: AdamW operation order] in optim/adamw.h); sgd() those of
// optim::sgd_update. One exception: a NaN produced by arithmetic may carry the device's canonical
// NaN bits rather than the input's sign and payload (convert() keeps them on every device).
// grad_stats() is deterministic for a device and sizes, but its fp64 summation order is the
// device's own (the CPU sums span by span, element by element).
//
// Thread-safety: one thread at a time (the engine's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/buffer.h"
#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace zs {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  virtual Device device() const = 0;
  // Where the engine's buffers live: parameters, gradients, fp32 master and optimizer state (when
  // not offloaded), gradient scratch and communication buffers, gather slots.
  virtual Allocator& allocator() = 0;
  // True when the host may dereference memory from allocator() (the CPU).
  bool host_accessible() const { return device().kind == DeviceKind::kCpu; }

  // p[0, bytes) = 0.
  virtual void zero(void* p, size_t bytes) = 0;
  // dst[i] = convert(src[i]) for n elements; dtypes fp32, bf16, fp16. src == dst only when the
  // dtypes are equal (then a no-op).
  virtual void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) = 0;
  // dst[i] = round_{dst_dtype}(float(dst[i]) + float(src[i])) for n elements; src_dtype is
  // dst_dtype or fp32.
  virtual void accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                          int64_t n) = 0;

  // One span of a gradient shard for grad_stats(); `group` indexes the per-group finite flags.
  struct StatsSpan {
    const void* data = nullptr;
    DType dtype = DType::kF32;
    int64_t n = 0;
    int group = 0;
  };
  // Returns the sum of squares (fp64) of every element of every span, and sets finite[g] to 1
  // when every element of the spans of group g is finite, else 0 (finite.size() groups; every
  // span's group must be below it). Synchronizes: the value is on the host.
  virtual double grad_stats(std::span<const StatsSpan> spans, std::span<uint8_t> finite) = 0;

  // One AdamW update of n elements, as optim::adamw_reference: master, m, v fp32 on this device;
  // grad of grad_dtype on this device; out (may be null) of out_dtype on this device.
  virtual void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v,
                     int64_t n, const optim::AdamWStep& step, void* out, DType out_dtype) = 0;
  // One SGD-with-momentum update, as optim::sgd_update (momentum may be null).
  virtual void sgd(float* master, const void* grad, DType grad_dtype, float* momentum, int64_t n,
                   const optim::SgdConfig& cfg, float lr, float grad_scale, bool with_decay,
                   void* out, DType out_dtype) = 0;

  // Synchronous copies between this device's memory and host memory.
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  // Asynchronous device -> host copy, ordered after every earlier call and overlapping later
  // ones (on CUDA: a copy stream that waits for the compute stream's event; host_dst should be
  // page-locked). host_dst holds the bytes once wait_host_copies() returns; until then later
  // calls must not write or free src.
  virtual void copy_to_host_async(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void wait_host_copies() = 0;
  // Asynchronous host -> device copy, ordered before every later call. host_src must stay
  // unchanged until synchronize() (or a synchronizing call) returns.
  virtual void copy_from_host_async(void* dst, const void* host_src, size_t bytes) = 0;
  // Waits on the host for every call made so far.
  virtual void synchronize() = 0;
};

// The host implementation: cpu_allocator(), plain loops, optim::cpu_adamw for AdamW.
DeviceOps& cpu_device_ops();

}  // namespace zs
