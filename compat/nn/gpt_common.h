// Forward header: nn/gpt_common.h moved to models/gpt/gpt_common.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/nn/gpt_common.h> compiling for the 0.2 releases and goes in 0.3;
// include <zeroshard/models/gpt/gpt_common.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/gpt_common.h> moved to <zeroshard/models/gpt/gpt_common.h>; this forward header goes in 0.3")
#include "models/gpt/gpt_common.h"
