// Internals of optim/cpu_adam.cc exposed for tests and benchmarks: run one chosen path with a
// chosen thread count, bypassing the run-time choice. Not part of the public interface.
#pragma once

#include <cstdint>
#include <functional>

#include "core/dtype.h"
#include "optim/adamw.h"

namespace zs::optim::detail {

enum class AdamIsa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// "scalar", "avx2", "avx512".
const char* adam_isa_name(AdamIsa isa);
// True when this CPU can run `isa` (ignores the ISA cap).
bool adam_isa_supported(AdamIsa isa);
// The path cpu_adamw() takes: active_simd_level() (the best supported level under ZS_MAX_ISA).
AdamIsa active_adam_isa();

// cpu_adamw() on `isa` (must be supported: else zs::Error(kUnsupported)) with `threads` threads
// (>= 1); returns what cpu_adamw() returns.
bool cpu_adamw_with(AdamIsa isa, int threads, float* p, const void* grad, DType grad_dtype,
                    float* m, float* v, int64_t n, const optim::AdamWStep& s, void* out,
                    DType out_dtype);

// Calls fn(begin, end) over [0, n) split into at most `threads` contiguous ranges whose starts are
// multiples of `align`, on OpenMP threads that run under the caller's MXCSR; one range on the
// calling thread when threads <= 1 or n < 32768. n <= 0 calls nothing.
void parallel_ranges(int threads, int64_t n, int64_t align,
                     const std::function<void(int64_t, int64_t)>& fn);

// One thread, the kernel of `isa` (supported; not checked) over n elements: fp32 p, g, m, v, no
// out; the bits of adamw_reference. The fused low-bit-state kernels run it on their fp32 blocks.
void adam_f32_span(AdamIsa isa, float* p, const float* g, float* m, float* v, int64_t n,
                   const optim::AdamWStep& s);

}  // namespace zs::optim::detail
