#!/usr/bin/env bash
# Fails when a Python file in the given folder has the name of a standard-library module: running
# any script of that folder puts the folder first on sys.path, so the file would replace the
# module for every import (scripts/tokenize.py broke matplotlib that way). Needs Python >= 3.10
# (sys.stdlib_module_names); skipped (77) without one.
dir=${1:?usage: scripts_names.sh DIR}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
"$py" - "$dir" <<'PY'
import os, sys
if not hasattr(sys, "stdlib_module_names"):
    print("SKIP: Python < 3.10 has no sys.stdlib_module_names")
    sys.exit(77)
bad = [f for f in sorted(os.listdir(sys.argv[1]))
       if f.endswith(".py") and f[:-3] in sys.stdlib_module_names]
for f in bad:
    print(f"FAIL: {sys.argv[1]}/{f} shadows the standard-library module '{f[:-3]}'")
if not bad:
    print(f"scripts names ok: no file of {sys.argv[1]} shadows a standard-library module")
sys.exit(1 if bad else 0)
PY
