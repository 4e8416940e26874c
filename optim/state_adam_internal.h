// Internals of optim/state_adam.cc exposed for tests and benchmarks: run one chosen path with a
// chosen thread count, bypassing the run-time choice. Not part of the public interface.
#pragma once

#include <cstdint>

#include "optim/cpu_adam_internal.h"
#include "optim/state_adam.h"

namespace zs::optim::detail {

// cpu_adamw_bf16_states() / cpu_adamw_int8_states() on `isa` (must be supported: else
// zs::Error(kUnsupported)) with `threads` threads (>= 1).
void cpu_adamw_bf16_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, uint16_t* m, uint16_t* v, int64_t n,
                                const AdamWStep& s, void* out, DType out_dtype);
void cpu_adamw_int8_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, QuantizedMoment m, QuantizedMoment v, int64_t n,
                                const Int8StateFormat& format, const AdamWStep& s, void* out,
                                DType out_dtype);

}  // namespace zs::optim::detail
