// Forward header: models/gpt/gpt_hf.h moved to interop/gpt_hf.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/nn/gpt_hf.h> compiling for the 0.2 releases and goes in 0.3;
// include <zeroshard/interop/gpt_hf.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/gpt_hf.h> moved to <zeroshard/interop/gpt_hf.h>; this forward header goes in 0.3")
#include "interop/gpt_hf.h"
