// Forward header: runtime/checkpoint.h moved to checkpoint/checkpoint.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/runtime/checkpoint.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/checkpoint/checkpoint.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/checkpoint.h> moved to <zeroshard/checkpoint/checkpoint.h>; this forward header goes in 0.3")
#include "checkpoint/checkpoint.h"
