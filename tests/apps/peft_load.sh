#!/usr/bin/env bash
# ctest driver of the PEFT load tests (peft_load.py, tests/interop/peft_llama.py; docs/finetune.md,
# docs/interop.md):
#   peft_load.sh SYSTEM_PYTHON VENV SCRIPT [ARGS...]
# Builds (once) a venv over SYSTEM_PYTHON's packages, so that it sees Debian's python3-torch
# 1.13, and installs the pinned transformers, safetensors, accelerate and peft from PyPI into it;
# later runs reuse it. Exits 77 (skipped) with the reason when torch is missing, no venv can be
# made or PyPI cannot be reached.
set -euo pipefail
sys_py=$1 venv=$2 script=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
# transformers 4.36 is among the last releases that support torch 1.13 (Debian bookworm's); peft
# 0.7.1 (December 2023) and accelerate 0.25.0 are of the same time and import on torch 1.13.
pins=(transformers==4.36.2 safetensors==0.4.5 accelerate==0.25.0)
peft_pin=peft==0.7.1
# shellcheck source=torch_venv.sh
. "$here/torch_venv.sh"
torch_venv "$sys_py" "$venv"
want="4.36.2 0.4.5 0.25.0 0.7.1"
have=$("$py" -c 'import transformers, safetensors, accelerate, peft; print(transformers.__version__, safetensors.__version__, accelerate.__version__, peft.__version__)' 2>/dev/null || true)
if [ "$have" != "$want" ]; then
  echo "installing ${pins[*]} $peft_pin into $venv"
  pip=("$py" -m pip install -q --disable-pip-version-check --default-timeout=30)
  # peft declares torch>=1.13.0, which Debian's 1.13.0a0 does not satisfy as a version string:
  # without --no-deps pip would fetch PyPI's torch. Its other requirements (numpy, packaging,
  # psutil, pyyaml, tqdm, huggingface-hub, safetensors, transformers, accelerate) come with the
  # pins above or from the system.
  if ! "${pip[@]}" "${pins[@]}" || ! "${pip[@]}" --no-deps "$peft_pin"; then
    echo "SKIP: cannot install ${pins[*]} $peft_pin from PyPI (no network?); PEFT was not run"
    exit 77
  fi
fi
exec "$py" "$script" "$@"
