// Forward header: offload/cpu_adam.h moved to optim/cpu_adam.h in zeroshard 0.2 (README, "Layout").
// It keeps <zeroshard/offload/cpu_adam.h> compiling for the 0.2 releases and goes in 0.3; include
// <zeroshard/optim/cpu_adam.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/offload/cpu_adam.h> moved to <zeroshard/optim/cpu_adam.h>; this forward header goes in 0.3")
#include "optim/cpu_adam.h"
