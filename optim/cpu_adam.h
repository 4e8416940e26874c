// SIMD CPU AdamW, the host kernel of the resident CPU path and of offloaded optimizer state: one
// fused, threaded pass over (p, grad, m, v) that also writes the compute-dtype copy of the updated
// parameter.
//
// cpu_adamw() has exactly the signature and the results of optim::adamw_reference: the same
// operation order ([Note: AdamW operation order] in optim/adamw.h), every step a correctly rounded
// IEEE operation (mul, add, sub, div, sqrt; no FMA, no reciprocal approximations), and the same
// round-to-nearest-even conversions as core/convert.h. The engine may swap one for the
// other and get the same bits (tests/optim/cpu_adam_test.cc checks every path).
//
// Paths, chosen once at run time from the CPU's features (no -march at build time):
//   "avx512"  AVX-512F (+AVX2/F16C for the 16-bit loads and stores), 16 lanes
//   "avx2"    AVX2 + F16C, 8 lanes
//   "scalar"  plain C++
// The level is core's active_simd_level(): ZS_MAX_ISA=scalar|avx2 caps it.
// Threads: OpenMP, up to set_cpu_adam_threads() threads (default omp_get_max_threads()). Each
// thread takes one contiguous range whose start is a multiple of 64 elements; since every element
// is computed independently with the same operations on every path, the result never depends on
// the thread count or on where a range starts. The worker threads run under the caller's MXCSR
// (flush-to-zero, denormals-are-zero, rounding mode), so the equality with the reference holds
// whatever the caller set.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "optim/adamw.h"

namespace zs::optim {

// In place over n elements: p, m, v fp32; grad of grad_dtype (fp32, bf16, fp16); out (may be
// null) receives the updated p rounded to out_dtype (fp32, bf16, fp16). Spans must not overlap,
// except that out may alias p when out_dtype is fp32. Returns false when an updated p is an inf or
// NaN or rounds to an inf in out_dtype (the kernels compare |p| with that limit in registers as
// they go: the engine's [Note: non-finite policy]; the returned values are unchanged). Throws
// zs::Error(kInvalidArgument) for other dtypes or n < 0. Thread-safety: concurrent calls on
// disjoint spans are safe (each opens its own OpenMP team; mind the core budget).
bool cpu_adamw(float* p, const void* grad, DType grad_dtype, float* m, float* v, int64_t n,
               const optim::AdamWStep& s, void* out, DType out_dtype);

// The number of threads cpu_adamw() uses; threads <= 0 restores the default,
// omp_get_max_threads() read at each call. Process-wide; safe to call concurrently.
void set_cpu_adam_threads(int threads);
int cpu_adam_threads();

// The active path: "avx512", "avx2" or "scalar". Fixed for the life of the process.
const char* cpu_adam_isa();

}  // namespace zs::optim
