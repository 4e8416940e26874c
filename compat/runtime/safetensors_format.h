// Forward header: runtime/safetensors_format.h moved to checkpoint/safetensors_format.h in
// zeroshard 0.2 (README, "Layout"). It keeps <zeroshard/runtime/safetensors_format.h> compiling for
// the 0.2 releases and goes in 0.3; include <zeroshard/checkpoint/safetensors_format.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/safetensors_format.h> moved to <zeroshard/checkpoint/safetensors_format.h>; this forward header goes in 0.3")
#include "checkpoint/safetensors_format.h"
