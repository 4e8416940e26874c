// Forward header: nn/transformer_plan.h moved to planner/transformer_plan.h in zeroshard 0.2
// (README, "Layout"). It keeps <zeroshard/nn/transformer_plan.h> compiling for the 0.2 releases and
// goes in 0.3; include <zeroshard/planner/transformer_plan.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/transformer_plan.h> moved to <zeroshard/planner/transformer_plan.h>; this forward header goes in 0.3")
#include "planner/transformer_plan.h"
