// Forward header: nn/transformer_shapes.h moved to models/gpt/transformer_shapes.h in zeroshard 0.2
// (README, "Layout"). It keeps <zeroshard/nn/transformer_shapes.h> compiling for the 0.2 releases
// and goes in 0.3; include <zeroshard/models/gpt/transformer_shapes.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/transformer_shapes.h> moved to <zeroshard/models/gpt/transformer_shapes.h>; this forward header goes in 0.3")
#include "models/gpt/transformer_shapes.h"
