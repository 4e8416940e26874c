#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file is not formatted by the root .clang-format.
# Skipped (exit 77) when clang-format is not installed.
cd "$(dirname "$0")/.." || exit 1
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed"; exit 77; }
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' 2>/dev/null)
[ ${#files[@]} -gt 0 ] || { echo "SKIP: not a git checkout"; exit 77; }
clang-format --dry-run -Werror "${files[@]}" && echo "format ok: ${#files[@]} files"
