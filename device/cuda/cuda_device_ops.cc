#include "device/cuda/cuda_device_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs {

namespace {

// Makes `device` current for one call and restores the caller's device. Never throws: a failure
// surfaces in the CUDA call that follows.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) noexcept {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  }
  ~ScopedDevice() {
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess) cudaGetLastError();
    if (prev_ >= 0 && cur != prev_) cudaSetDevice(prev_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int prev_ = -1;
};

int current_device() {
  int dev = -1;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice (CudaDeviceOps)", ErrorCode::kUnsupported);
  return dev;
}

bool is_float(DType dt) { return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16; }

void check_float(const char* op, const char* what, DType dt) {
  ZS_CHECK(is_float(dt), ErrorCode::kInvalidArgument,
           "CudaDeviceOps::{}: {} dtype {} is not fp32, bf16 or fp16", op, what, dtype_name(dt));
}

void check_count(const char* op, int64_t n) {
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "CudaDeviceOps::{}: negative count {}", op, n);
}

size_t round_up(size_t x, size_t q) { return (x + q - 1) / q * q; }

// The grad_stats scratch layout for a list of `spans` spans and `groups` groups.
struct StatsLayout {
  size_t table_bytes;   // device and host: the span table at offset 0
  size_t partial_at;    // device: kGradStatsListBlocks doubles
  size_t result_at;     // device: fp64 sum, then `groups` uint32 flags
  size_t result_bytes;  // 8 + 4 * groups
  size_t host_result_at;
  size_t dev_bytes;
  size_t host_bytes;
};

StatsLayout stats_layout(size_t spans, size_t groups) {
  StatsLayout l;
  l.table_bytes = round_up(std::max<size_t>(spans, 1) * sizeof(gpu::GradStatsSpan), 256);
  l.partial_at = l.table_bytes;
  l.result_at = l.partial_at + sizeof(double) * gpu::kGradStatsListBlocks;
  l.result_bytes = sizeof(double) + sizeof(uint32_t) * groups;
  l.dev_bytes = l.result_at + l.result_bytes;
  l.host_result_at = l.table_bytes;
  l.host_bytes = l.host_result_at + l.result_bytes;
  return l;
}

}  // namespace

CudaDeviceOps::CudaDeviceOps(cudaStream_t compute)
    : device_(current_device()), compute_(compute), allocator_(device_) {
  ScopedDevice on(device_);
  cuda_check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags (CudaDeviceOps copy stream)");
  const cudaError_t err = cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    cudaStreamDestroy(copy_);
    cuda_check(err, "cudaEventCreateWithFlags (CudaDeviceOps)");
  }
}

CudaDeviceOps::~CudaDeviceOps() {
  ScopedDevice on(device_);
  // Destructors do not throw: errors here are dropped (and cleared).
  if (cudaStreamSynchronize(copy_) != cudaSuccess) cudaGetLastError();
  if (cudaEventDestroy(compute_done_) != cudaSuccess) cudaGetLastError();
  if (cudaStreamDestroy(copy_) != cudaSuccess) cudaGetLastError();
}

void CudaDeviceOps::zero(void* p, size_t bytes) {
  if (bytes == 0) return;
  ScopedDevice on(device_);
  cuda_check(cudaMemsetAsync(p, 0, bytes, compute_), "cudaMemsetAsync (CudaDeviceOps::zero)");
}

void CudaDeviceOps::convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                            int64_t n) {
  check_float("convert", "source", src_dtype);
  check_float("convert", "destination", dst_dtype);
  check_count("convert", n);
  ZS_CHECK(src != dst || src_dtype == dst_dtype, ErrorCode::kInvalidArgument,
           "CudaDeviceOps::convert: in place from {} to {} (only equal dtypes may alias)",
           dtype_name(src_dtype), dtype_name(dst_dtype));
  if (n == 0 || src == dst) return;
  ScopedDevice on(device_);
  cuda_check(gpu::cast(src, src_dtype, dst, dst_dtype, n, compute_), "gpu::cast");
}

void CudaDeviceOps::accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                               int64_t n) {
  check_float("accumulate", "destination", dst_dtype);
  ZS_CHECK(src_dtype == dst_dtype || src_dtype == DType::kF32, ErrorCode::kInvalidArgument,
           "CudaDeviceOps::accumulate: source dtype {} must be {} or fp32", dtype_name(src_dtype),
           dtype_name(dst_dtype));
  check_count("accumulate", n);
  if (n == 0) return;
  ScopedDevice on(device_);
  cuda_check(gpu::accumulate(dst, dst_dtype, src, src_dtype, n, compute_), "gpu::accumulate");
}

void CudaDeviceOps::reserve_stats(size_t spans, size_t groups) {
  if (spans <= stats_spans_ && groups <= stats_groups_ && !stats_dev_.empty()) return;
  stats_spans_ = std::max(spans, stats_spans_);
  stats_groups_ = std::max(groups, stats_groups_);
  const StatsLayout l = stats_layout(stats_spans_, stats_groups_);
  // Every grad_stats() ends with a compute-stream synchronization, so the old scratch is idle.
  stats_dev_ = Buffer(l.dev_bytes, MemCategory::kOther, &stats_tracker_, &allocator_);
  stats_host_ =
      Buffer(l.host_bytes, MemCategory::kOther, &stats_tracker_, &pinned_host_allocator());
}

double CudaDeviceOps::grad_stats(std::span<const StatsSpan> spans, std::span<uint8_t> finite) {
  ZS_CHECK(spans.size() <= static_cast<size_t>(std::numeric_limits<int>::max()) &&
               finite.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
           ErrorCode::kInvalidArgument, "CudaDeviceOps::grad_stats: {} spans, {} groups",
           spans.size(), finite.size());
  for (const StatsSpan& s : spans) {
    ZS_CHECK(s.group >= 0 && static_cast<size_t>(s.group) < finite.size(),
             ErrorCode::kInvalidArgument, "grad_stats: span group {} outside [0, {})", s.group,
             finite.size());
    check_float("grad_stats", "span", s.dtype);
    check_count("grad_stats", s.n);
    ZS_CHECK(s.n == 0 || s.data != nullptr, ErrorCode::kInvalidArgument,
             "CudaDeviceOps::grad_stats: null span of {} elements", s.n);
  }
  ScopedDevice on(device_);
  if (spans.empty()) {
    std::fill(finite.begin(), finite.end(), uint8_t{1});
    synchronize();  // the contract: a value handed to the host waits for everything before it
    return 0.0;
  }
  reserve_stats(spans.size(), finite.size());
  const StatsLayout l = stats_layout(stats_spans_, stats_groups_);
  auto* dev = static_cast<char*>(stats_dev_.data());
  auto* host = static_cast<char*>(stats_host_.data());

  auto* table = reinterpret_cast<gpu::GradStatsSpan*>(host);
  for (size_t i = 0; i < spans.size(); ++i) {
    table[i] = gpu::GradStatsSpan{spans[i].data, spans[i].n, spans[i].dtype, spans[i].group};
  }
  const size_t result_bytes = sizeof(double) + sizeof(uint32_t) * finite.size();
  cuda_check(cudaMemcpyAsync(dev, host, spans.size() * sizeof(gpu::GradStatsSpan),
                             cudaMemcpyHostToDevice, compute_),
             "cudaMemcpyAsync (CudaDeviceOps::grad_stats span table)");
  auto* dev_sum = reinterpret_cast<double*>(dev + l.result_at);
  auto* dev_flags = reinterpret_cast<uint32_t*>(dev + l.result_at + sizeof(double));
  cuda_check(gpu::grad_stats_list(reinterpret_cast<const gpu::GradStatsSpan*>(dev),
                                  static_cast<int>(spans.size()), static_cast<int>(finite.size()),
                                  reinterpret_cast<double*>(dev + l.partial_at), dev_sum, dev_flags,
                                  compute_),
             "gpu::grad_stats_list");
  cuda_check(cudaMemcpyAsync(host + l.host_result_at, dev_sum, result_bytes, cudaMemcpyDeviceToHost,
                             compute_),
             "cudaMemcpyAsync (CudaDeviceOps::grad_stats result)");
  cuda_check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize (CudaDeviceOps::grad_stats)");

  double sum_squares = 0.0;
  std::memcpy(&sum_squares, host + l.host_result_at, sizeof(double));
  for (size_t g = 0; g < finite.size(); ++g) {
    uint32_t flag = 0;
    std::memcpy(&flag, host + l.host_result_at + sizeof(double) + sizeof(uint32_t) * g,
                sizeof flag);
    finite[g] = flag == 0 ? 1 : 0;
  }
  return sum_squares;
}

void CudaDeviceOps::adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v,
                          int64_t n, const optim::AdamWStep& step, void* out, DType out_dtype) {
  check_float("adamw", "gradient", grad_dtype);
  if (out != nullptr) check_float("adamw", "output", out_dtype);
  check_count("adamw", n);
  if (n == 0) return;
  ScopedDevice on(device_);
  cuda_check(gpu::adamw(master, grad, grad_dtype, m, v, n, step, out, out_dtype, compute_),
             "gpu::adamw");
}

void CudaDeviceOps::sgd(float* master, const void* grad, DType grad_dtype, float* momentum,
                        int64_t n, const optim::SgdConfig& cfg, float lr, float grad_scale,
                        bool with_decay, void* out, DType out_dtype) {
  check_float("sgd", "gradient", grad_dtype);
  if (out != nullptr) check_float("sgd", "output", out_dtype);
  check_count("sgd", n);
  ZS_CHECK(cfg.momentum == 0.0f || momentum != nullptr || n == 0, ErrorCode::kInvalidArgument,
           "CudaDeviceOps::sgd: momentum {} without a momentum buffer", cfg.momentum);
  if (n == 0) return;
  ScopedDevice on(device_);
  cuda_check(gpu::sgd(master, grad, grad_dtype, momentum, n, cfg, lr, grad_scale, with_decay, out,
                      out_dtype, compute_),
             "gpu::sgd");
}

void CudaDeviceOps::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ScopedDevice on(device_);
  cuda_check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, compute_),
             "cudaMemcpyAsync (CudaDeviceOps::copy_to_host)");
  cuda_check(cudaStreamSynchronize(compute_),
             "cudaStreamSynchronize (CudaDeviceOps::copy_to_host)");
}

void CudaDeviceOps::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  ScopedDevice on(device_);
  cuda_check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, compute_),
             "cudaMemcpyAsync (CudaDeviceOps::copy_from_host)");
  cuda_check(cudaStreamSynchronize(compute_),
             "cudaStreamSynchronize (CudaDeviceOps::copy_from_host)");
}

void CudaDeviceOps::copy_to_host_async(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ScopedDevice on(device_);
  cuda_check(cudaEventRecord(compute_done_, compute_),
             "cudaEventRecord (CudaDeviceOps::copy_to_host_async)");
  cuda_check(cudaStreamWaitEvent(copy_, compute_done_, 0),
             "cudaStreamWaitEvent (CudaDeviceOps::copy_to_host_async)");
  cuda_check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, copy_),
             "cudaMemcpyAsync (CudaDeviceOps::copy_to_host_async)");
}

void CudaDeviceOps::wait_host_copies() {
  ScopedDevice on(device_);
  cuda_check(cudaStreamSynchronize(copy_), "cudaStreamSynchronize (CudaDeviceOps copy stream)");
}

void CudaDeviceOps::copy_from_host_async(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  ScopedDevice on(device_);
  cuda_check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, compute_),
             "cudaMemcpyAsync (CudaDeviceOps::copy_from_host_async)");
}

void CudaDeviceOps::synchronize() {
  ScopedDevice on(device_);
  cuda_check(cudaStreamSynchronize(compute_), "cudaStreamSynchronize (CudaDeviceOps compute)");
  cuda_check(cudaStreamSynchronize(copy_), "cudaStreamSynchronize (CudaDeviceOps copy stream)");
}

}  // namespace zs
