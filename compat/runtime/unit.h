// Forward header: runtime/unit.h moved to unit/unit.h in zeroshard 0.2 (README, "Layout"). It keeps
// <zeroshard/runtime/unit.h> compiling for the 0.2 releases and goes in 0.3; include
// <zeroshard/unit/unit.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/unit.h> moved to <zeroshard/unit/unit.h>; this forward header goes in 0.3")
#include "unit/unit.h"
