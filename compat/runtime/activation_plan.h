// Forward header: runtime/activation_plan.h moved to unit/activation_plan.h in zeroshard 0.2
// (README, "Layout"). It keeps <zeroshard/runtime/activation_plan.h> compiling for the 0.2 releases
// and goes in 0.3; include <zeroshard/unit/activation_plan.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/activation_plan.h> moved to <zeroshard/unit/activation_plan.h>; this forward header goes in 0.3")
#include "unit/activation_plan.h"
