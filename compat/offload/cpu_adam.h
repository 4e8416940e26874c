// Forward header: offload/cpu_adam.h moved to optim/cpu_adam.h in zeroshard 0.2 (README, "Layout").
// It keeps <zeroshard/offload/cpu_adam.h> compiling for the 0.2 releases and goes in 0.3; include
// <zeroshard/optim/cpu_adam.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/offload/cpu_adam.h> moved to <zeroshard/optim/cpu_adam.h>; this forward header goes in 0.3")
#include "optim/cpu_adam.h"

// 0.1 spelled the kernel zs::offload::cpu_adamw; it is zs::optim::cpu_adamw from 0.2.
namespace zs::offload {
using optim::cpu_adam_isa;
using optim::cpu_adam_threads;
using optim::cpu_adamw;
using optim::set_cpu_adam_threads;
}  // namespace zs::offload
