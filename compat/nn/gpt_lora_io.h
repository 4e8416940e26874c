// Forward header: models/gpt/gpt_lora_io.h moved to interop/gpt_lora_io.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/nn/gpt_lora_io.h> compiling for the 0.2 releases and goes in 0.3;
// include <zeroshard/interop/gpt_lora_io.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/nn/gpt_lora_io.h> moved to <zeroshard/interop/gpt_lora_io.h>; this forward header goes in 0.3")
#include "interop/gpt_lora_io.h"
