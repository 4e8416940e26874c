// CudaDeviceOps: the CUDA implementation of zs::DeviceOps (device/device_ops.h) for one device.
//
// Streams. Every op is enqueued on the compute stream given at construction (the stream the model's
// kernels and the NCCL communicator are ordered against), so ops are ordered among themselves and
// with that other work by stream order alone; nothing here synchronizes the host except
// grad_stats(), copy_to_host(), copy_from_host(), wait_host_copies() and synchronize().
// copy_to_host_async() runs on a copy stream owned by this object: it records an event on the
// compute stream and makes the copy stream wait for it, so the copy sees every earlier op and later
// compute work overlaps it.
//
// Results. The kernels are device/cuda/kernels/ops_kernels.h: convert, accumulate, adamw and sgd
// give the CPU's bits for every element whose result is not a NaN made by arithmetic (a NaN input
// to adamw/sgd/accumulate gives NaN on both, in the GPU's canonical bits here); convert keeps NaN
// bits exactly as convert.h. grad_stats() sums in its own fixed order (one fixed grid over the
// spans' concatenation): deterministic for given span sizes, within fp64 rounding of the CPU's.
//
// Errors. Bad arguments (a dtype outside fp32/bf16/fp16, n < 0, an in-place convert between two
// dtypes, accumulate from a third dtype, a span group outside the flags, sgd momentum without a
// buffer) throw zs::Error(kInvalidArgument) before anything is enqueued.
// CUDA failures throw zs::Error naming the call (device/cuda/cuda_error.h); errors of a kernel
// that faults surface at the next synchronizing call, as with any CUDA stream.
//
// Device. The device current at construction is the one served; each call makes it current for
// its own duration (and restores the caller's), so a caller that switched devices does not send
// work to the wrong one.
//
// Thread-safety: one thread at a time, as DeviceOps.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "device/cuda/cuda_allocator.h"
#include "device/device_ops.h"

namespace zs {

class CudaDeviceOps final : public DeviceOps {
 public:
  // Serves the current device (cudaGetDevice) and enqueues on `compute`, which must belong to that
  // device and outlive this object (not owned; nullptr is the legacy default stream). Creates the
  // allocator, the copy stream and its event. Throws zs::Error(kUnsupported) without a device.
  explicit CudaDeviceOps(cudaStream_t compute);
  // Waits for the copy stream (a pending async copy must not outlive its event and stream), then
  // frees the scratch, the stream and the event. The allocator goes with this object: every Buffer
  // made from allocator() must be gone first.
  ~CudaDeviceOps() override;
  CudaDeviceOps(const CudaDeviceOps&) = delete;
  CudaDeviceOps& operator=(const CudaDeviceOps&) = delete;

  Device device() const override { return Device::cuda(device_); }
  // A CudaCachingAllocator for the device, owned by this object (see its [Note: caching
  // allocator]: allocate() zero-fills and synchronizes the device; buffers are made at set-up).
  Allocator& allocator() override { return allocator_; }
  CudaCachingAllocator& cuda_allocator() { return allocator_; }
  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t copy_stream() const { return copy_; }

  // cudaMemsetAsync on the compute stream.
  void zero(void* p, size_t bytes) override;
  // gpu::cast; equal dtypes copy device to device (src == dst: nothing).
  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) override;
  // gpu::accumulate: one fp32 addition, one rounding to dst_dtype.
  void accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n) override;
  // The whole list in one launch pair (gpu::grad_stats_list): the span table goes to the device
  // through pinned staging, then one device -> host copy of the sum and the per-group flags and one
  // compute-stream synchronization. Scratch (device and pinned) grows to the largest list seen and
  // is kept; growing allocates from allocator(), which synchronizes the device once.
  double grad_stats(std::span<const StatsSpan> spans, std::span<uint8_t> finite) override;
  void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
             const optim::AdamWStep& step, void* out, DType out_dtype) override;
  void sgd(float* master, const void* grad, DType grad_dtype, float* momentum, int64_t n,
           const optim::SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
           DType out_dtype) override;

  // On the compute stream, then a compute-stream synchronization: ordered after every earlier op,
  // and the bytes are in place (resp. host_src is free to reuse) on return.
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  // Copy stream after an event on the compute stream. host_dst should be page-locked (pageable
  // memory makes CUDA copy synchronously with respect to the host). Later ops must not write `src`
  // (nor free its buffer) before wait_host_copies(): the copy stream may still be reading it.
  void copy_to_host_async(void* host_dst, const void* src, size_t bytes) override;
  // cudaStreamSynchronize(copy stream).
  void wait_host_copies() override;
  // cudaMemcpyAsync host -> device on the compute stream.
  void copy_from_host_async(void* dst, const void* host_src, size_t bytes) override;
  // Synchronizes the compute stream, then the copy stream: every call made so far is complete,
  // async host copies included.
  void synchronize() override;

 private:
  // Makes room for a grad_stats list of `spans` spans and `groups` groups.
  void reserve_stats(size_t spans, size_t groups);

  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  CudaCachingAllocator allocator_;
  // grad_stats scratch. Device: the span table, then the block partials, then the result
  // (fp64 sum followed by one uint32 flag per group). Pinned host: the table staging, then room
  // for the result. Counted by a tracker of its own, not the process's: it is the backend's
  // scratch (a few KiB), not one of the buffers the engine plans.
  MemoryTracker stats_tracker_;
  Buffer stats_dev_;
  Buffer stats_host_;
  size_t stats_spans_ = 0;
  size_t stats_groups_ = 0;
};

}  // namespace zs
