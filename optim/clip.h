// Local pieces of gradient clipping and the finite check. The engine sums the shard results over
// ranks with one all-reduce and hands the global figures back.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::optim {

struct SpanStats {
  double sum_squares = 0.0;  // in fp64, in 8 lanes ([Note: sum of squares lanes] in clip.cc)
  bool finite = true;
};

// Sum of squares (fp64) of n elements of a float buffer, and whether all are finite.
SpanStats span_stats(const void* data, DType dtype, int64_t n);

// The index of the first of n elements of an fp32, bf16 or fp16 buffer that is not finite (an
// exponent of all ones: inf or NaN), -1 when every one is. A bit test over blocks, vectorized by
// the compiler; it reads each element once and computes nothing from the values, so it is the
// check an update can afford on the shard it has just written (Engine: [Note: non-finite policy]).
int64_t first_nonfinite(const void* data, DType dtype, int64_t n);

// The factor that brings a gradient of norm `norm` to at most `max_norm` (1 when max_norm <= 0
// or the norm is already below it): max_norm / (norm + 1e-6), PyTorch's clip_grad_norm_ rule.
float clip_factor(double norm, float max_norm);

}  // namespace zs::optim
