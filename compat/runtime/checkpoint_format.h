// Forward header: runtime/checkpoint_format.h moved to checkpoint/checkpoint_format.h in zeroshard
// 0.2 (README, "Layout"). It keeps <zeroshard/runtime/checkpoint_format.h> compiling for the 0.2
// releases and goes in 0.3; include <zeroshard/checkpoint/checkpoint_format.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/checkpoint_format.h> moved to <zeroshard/checkpoint/checkpoint_format.h>; this forward header goes in 0.3")
#include "checkpoint/checkpoint_format.h"
