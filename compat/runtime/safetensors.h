// Forward header: runtime/safetensors.h moved to checkpoint/safetensors.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/runtime/safetensors.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/checkpoint/safetensors.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/safetensors.h> moved to <zeroshard/checkpoint/safetensors.h>; this forward header goes in 0.3")
#include "checkpoint/safetensors.h"
