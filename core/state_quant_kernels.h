// The vector block kernels of the 8-bit optimizer states (core/state_quant.h): decode one block,
// its absmax, encode one block. Written once as plain loops that GCC vectorizes (gathers from the
// code book's tables) and compiled per level ([Note: dispatched kernels] in core/simd_dispatch.h);
// every level gives the bits of the definition in core/state_quant.h. Callers (the fused AdamW of
// optim/state_adam.h) pick the level, so that tests can run each one. Pure; thread-safe on
// disjoint outputs; inputs and outputs must not overlap.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "core/state_quant.h"

namespace zs {

// x[i] = book.value[codes[i]] * scale for i < n.
void decode_state_block(SimdLevel level, const uint8_t* codes, float scale, int64_t n,
                        const StateCodeBook& book, float* x);

// The block's scale by the rule of core/state_quant.h: max |x[i]| (0 for n = 0), or NaN when any
// x[i] is not finite; state_block_scale's result bit for bit.
float state_block_scale_at(SimdLevel level, const float* x, int64_t n);

// codes[i] for i < n: 0 when scale is 0 or NaN, otherwise encode_state_value(book, x[i] / scale)
// (through the bucket table). scale must be the block's scale from the same x.
void encode_state_block(SimdLevel level, const float* x, float scale, int64_t n,
                        const StateCodeBook& book, uint8_t* codes);

}  // namespace zs
