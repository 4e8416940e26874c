#!/usr/bin/env bash
# ctest driver: safetensors_interop.sh PYTHON DUMP_EXE MPIEXEC [MPIEXEC FLAGS...]
# Exits 77 (skipped) when PYTHON lacks numpy or safetensors.
set -euo pipefail
py=$1 exe=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if ! "$py" -c 'import numpy, safetensors.numpy' 2>/dev/null; then
  echo "SKIP: $py has no numpy/safetensors (pip install safetensors numpy)"
  exit 77
fi
out=$(mktemp -d /tmp/zs-st-interop-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$@" -np 2 "$exe" "$out"
"$py" "$here/safetensors_interop.py" "$out"
