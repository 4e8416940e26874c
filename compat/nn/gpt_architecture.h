// Forward header: nn/gpt_architecture.h moved to models/gpt/gpt_architecture.h in zeroshard 0.2
// (README, "Layout"). It keeps <zeroshard/nn/gpt_architecture.h> compiling for the 0.2 releases and
// goes in 0.3; include <zeroshard/models/gpt/gpt_architecture.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/gpt_architecture.h> moved to <zeroshard/models/gpt/gpt_architecture.h>; this forward header goes in 0.3")
#include "models/gpt/gpt_architecture.h"
