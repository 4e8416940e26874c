// Forward header: runtime/save_dir.h moved to checkpoint/save_dir.h in zeroshard 0.2 (README,
// "Layout"). It keeps <zeroshard/runtime/save_dir.h> compiling for the 0.2 releases and goes in
// 0.3; include <zeroshard/checkpoint/save_dir.h> instead.
#pragma once
#pragma message( \
    "<zeroshard/runtime/save_dir.h> moved to <zeroshard/checkpoint/save_dir.h>; this forward header goes in 0.3")
#include "checkpoint/save_dir.h"
