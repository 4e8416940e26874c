// Internals of optim/state_adam.cc exposed for tests and benchmarks: run one chosen path with a
// chosen thread count, bypassing the run-time choice. Not part of the public interface.
#pragma once

#include <cstdint>

#include "optim/cpu_adam_internal.h"
#include "optim/state_adam.h"

namespace zs::optim::detail {

// cpu_adamw_bf16_states() / cpu_adamw_int8_states() on `isa` (must be supported: else
// zs::Error(kUnsupported)) with `threads` threads (>= 1).
bool cpu_adamw_bf16_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, uint16_t* m, uint16_t* v, int64_t n,
                                const AdamWStep& s, void* out, DType out_dtype);
bool cpu_adamw_int8_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, QuantizedMoment m, QuantizedMoment v, int64_t n,
                                const Int8StateFormat& format, const AdamWStep& s, void* out,
                                DType out_dtype);

// Scales of one int8-state block's new moments.
struct BlockScales {
  float m = 0, v = 0;
};

// Pass 1 of one int8-state block on AVX-512, fused (len a multiple of 16; the CPU must have
// AVX-512): m, v decoded from codes and scales (value * scale), AdamW on p[0, len) with the fp32
// gradient g, the new m, v written to m32, v32 [len], and their scales (state_block_scale's rule)
// returned. The bits of decode_state_block + adam_f32_span + state_block_scale_at.
BlockScales int8_block_adam_avx512(float* p, const float* g, const uint8_t* m_codes, float m_scale,
                                   const uint8_t* v_codes, float v_scale, int64_t len,
                                   const StateCodeBook& m_book, const StateCodeBook& v_book,
                                   const AdamWStep& s, float* m32, float* v32);

}  // namespace zs::optim::detail
