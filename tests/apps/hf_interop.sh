#!/usr/bin/env bash
# ctest driver of the Hugging Face round trip (hf_interop.py, docs/interop.md):
#   hf_interop.sh SYSTEM_PYTHON VENV ZS_TRAIN GPT_HF_LOGITS CORPUS WORKDIR MPIEXEC [FLAGS...]
# The venv and the pinned PyPI packages are hf_venv_run.sh's; exits 77 (skipped) with the reason
# when torch is missing or PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sys_py=$1 venv=$2
shift 2
exec bash "$here/hf_venv_run.sh" "$sys_py" "$venv" "$here/hf_interop.py" "$@"
