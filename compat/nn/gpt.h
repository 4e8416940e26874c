// Forward header: nn/gpt.h moved to models/gpt/gpt.h in zeroshard 0.2 (README, "Layout"). It keeps
// <zeroshard/nn/gpt.h> compiling for the 0.2 releases and goes in 0.3; include
// <zeroshard/models/gpt/gpt.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/gpt.h> moved to <zeroshard/models/gpt/gpt.h>; this forward header goes in 0.3")
#include "models/gpt/gpt.h"
