// Forward header: runtime/comm_model.h moved to planner/comm_model.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/runtime/comm_model.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/planner/comm_model.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/comm_model.h> moved to <zeroshard/planner/comm_model.h>; this forward header goes in 0.3")
#include "planner/comm_model.h"
