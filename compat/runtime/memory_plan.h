// Forward header: runtime/memory_plan.h moved to planner/memory_plan.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/runtime/memory_plan.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/planner/memory_plan.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/memory_plan.h> moved to <zeroshard/planner/memory_plan.h>; this forward header goes in 0.3")
#include "planner/memory_plan.h"
