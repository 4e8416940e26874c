// The host implementation of DeviceOps (device/device_ops.h).
#include <cstring>

#include "core/convert.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "optim/clip.h"
#include "optim/cpu_adam.h"

namespace zs {
namespace {

class CpuDeviceOps final : public DeviceOps {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return cpu_allocator(); }

  void zero(void* p, size_t bytes) override {
    if (bytes > 0) std::memset(p, 0, bytes);
  }

  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) override {
    if (src == dst && src_dtype == dst_dtype) return;
    zs::convert(src, src_dtype, dst, dst_dtype, static_cast<size_t>(n));
  }

  void accumulate(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                  int64_t n) override {
    ZS_CHECK(src_dtype == dst_dtype || src_dtype == DType::kF32, ErrorCode::kInvalidArgument,
             "accumulate: source dtype {} must be {} or fp32", dtype_name(src_dtype),
             dtype_name(dst_dtype));
    if (dst_dtype == DType::kF32) {
      float* d = static_cast<float*>(dst);
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] += s[i];
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      store_from_fp32(dst, dst_dtype, i,
                      load_as_fp32(dst, dst_dtype, i) + load_as_fp32(src, src_dtype, i));
    }
  }

  double grad_stats(std::span<const StatsSpan> spans, std::span<uint8_t> finite) override {
    std::fill(finite.begin(), finite.end(), uint8_t{1});
    double sum_squares = 0.0;
    for (const StatsSpan& s : spans) {
      ZS_CHECK(s.group >= 0 && static_cast<size_t>(s.group) < finite.size(),
               ErrorCode::kInvalidArgument, "grad_stats: span group {} outside [0, {})", s.group,
               finite.size());
      const optim::SpanStats st = optim::span_stats(s.data, s.dtype, s.n);
      sum_squares += st.sum_squares;
      if (!st.finite) finite[static_cast<size_t>(s.group)] = 0;
    }
    return sum_squares;
  }

  void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
             const optim::AdamWStep& step, void* out, DType out_dtype) override {
    // The SIMD CPU Adam gives the bits of optim::adamw_reference (tests/offload) at memory
    // bandwidth.
    optim::cpu_adamw(master, grad, grad_dtype, m, v, n, step, out, out_dtype);
  }

  void sgd(float* master, const void* grad, DType grad_dtype, float* momentum, int64_t n,
           const optim::SgdConfig& cfg, float lr, float grad_scale, bool with_decay, void* out,
           DType out_dtype) override {
    optim::sgd_update(master, grad, grad_dtype, momentum, n, cfg, lr, grad_scale, with_decay, out,
                      out_dtype);
  }

  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    if (bytes > 0 && host_dst != src) std::memcpy(host_dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    if (bytes > 0 && dst != host_src) std::memcpy(dst, host_src, bytes);
  }
  void copy_to_host_async(void* host_dst, const void* src, size_t bytes) override {
    copy_to_host(host_dst, src, bytes);
  }
  void wait_host_copies() override {}
  void copy_from_host_async(void* dst, const void* host_src, size_t bytes) override {
    copy_from_host(dst, host_src, bytes);
  }
  void synchronize() override {}
};

}  // namespace

DeviceOps& cpu_device_ops() {
  static CpuDeviceOps ops;
  return ops;
}

}  // namespace zs
