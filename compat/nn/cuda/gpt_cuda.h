// Forward header: nn/cuda/gpt_cuda.h moved to models/gpt/cuda/gpt_cuda.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/nn/cuda/gpt_cuda.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/models/gpt/cuda/gpt_cuda.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/cuda/gpt_cuda.h> moved to <zeroshard/models/gpt/cuda/gpt_cuda.h>; this forward header goes in 0.3")
#include "models/gpt/cuda/gpt_cuda.h"
