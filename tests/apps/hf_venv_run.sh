#!/usr/bin/env bash
# Runs a Python check against Hugging Face transformers:
#   hf_venv_run.sh SYSTEM_PYTHON VENV SCRIPT [ARGS...]
# Builds (once) a venv over SYSTEM_PYTHON's packages, so that it sees Debian's python3-torch
# 1.13, installs the pinned transformers and safetensors from PyPI into it (later runs reuse it),
# then runs SCRIPT ARGS with the venv's python. Exits 77 (skipped) with the reason when torch is
# missing or PyPI cannot be reached.
set -euo pipefail
sys_py=$1 venv=$2 script=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
# transformers 4.36 is among the last releases that support torch 1.13 (Debian bookworm's).
pins=(transformers==4.36.2 safetensors==0.4.5)
# shellcheck source=torch_venv.sh
. "$here/torch_venv.sh"
torch_venv "$sys_py" "$venv"
want="${pins[0]#*==} ${pins[1]#*==}"
have=$("$py" -c 'import transformers, safetensors; print(transformers.__version__, safetensors.__version__)' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  echo "installing ${pins[*]} into $venv"
  if ! "$py" -m pip install -q --disable-pip-version-check --default-timeout=30 "${pins[@]}"; then
    echo "SKIP: cannot install ${pins[*]} from PyPI (no network?); $(basename "$script") was not run"
    exit 77
  fi
fi
exec "$py" "$script" "$@"
