// Deterministic parameter initialisation: the value of element i of parameter p of unit u depends
// only on (seed, u, p, i), so every rank can fill exactly the elements it holds and every world
// size and stage starts from the same model.
#pragma once

#include <cstdint>

#include "unit/unit.h"

namespace zs {

// Writes values of elements [first, first + n) of the parameter into out.
void init_param_values(const Init& init, uint64_t seed, uint32_t unit, uint32_t param,
                       int64_t first, int64_t n, float* out);

}  // namespace zs
