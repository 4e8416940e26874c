// Deterministic parameter initialisation: the value of element i of parameter p of unit u depends
// only on (seed, u, p, i), so every rank can fill exactly the elements it holds and every world
// size and stage starts from the same model.
//
// [Note: vector draws] The definition is init_param_values_reference: per element a splitmix64
// word r = mix(key ^ mix(i)), then for a normal draw Box-Muller on its two halves in double,
//   z = sqrt(-2 log u1) cos(2 pi u2),  value = float(mean + std * z),
// with libm's log and cos. init_param_values gives the same bits faster: the words in vector
// loops, and for normal draws log and cos by polynomials that are vectorized (within a few ulps
// of libm's, which is itself within one), so t = mean + std * z differs from the reference's t
// by far less than d = 2^-40 (|mean| + |std| (|z| + 1)). When float(t - d) == float(t + d),
// every double within d of t rounds to float(t) (rounding is monotone), the reference's t
// included; otherwise (about one element in 10^4) the element is recomputed by the reference.
// Uniform draws use the reference's arithmetic as it is. The vector level follows
// active_simd_level() (core/cpu_features.h); every level gives the reference's bits.
#pragma once

#include <cstdint>

#include "unit/unit.h"

namespace zs {

// Writes values of elements [first, first + n) of the parameter into out, using up to `threads`
// OpenMP threads (0: the OpenMP default; one when called inside a parallel region). The values
// do not depend on the thread count or on how [first, first + n) is split between calls.
void init_param_values(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                       int64_t first, int64_t n, float* out, int threads = 1);

// Values init_param_values has written in this process so far (all threads; for progress reports
// of a long initialisation, e.g. zs_train's).
int64_t param_values_drawn();

// The definition, one element at a time with libm (the reference the tests compare with).
void init_param_values_reference(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                                 int64_t first, int64_t n, float* out);

}  // namespace zs
