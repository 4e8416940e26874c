# Sourced by the interop test drivers (hf_interop.sh, peft_load.sh): torch_venv SYSTEM_PYTHON VENV
# sets `py` to VENV's python, a venv over SYSTEM_PYTHON's packages (so that it sees Debian's
# python3-torch 1.13), made once and reused; it exits the driver with 77 (skipped) and the reason
# when SYSTEM_PYTHON has no torch or no venv can be made. Installing the pinned PyPI packages is
# the caller's.
torch_venv() {
  local sys_py=$1 venv=$2
  if ! "$sys_py" -c 'import torch' 2>/dev/null; then
    echo "SKIP: $sys_py has no torch (apt-get install python3-torch: Debian's 1.13 is enough)"
    exit 77
  fi
  py=$venv/bin/python
  if ! "$py" -c 'import torch' 2>/dev/null; then
    rm -rf "$venv"
    if ! "$sys_py" -m venv --system-site-packages "$venv" >/dev/null 2>&1; then
      echo "SKIP: cannot create a venv with $sys_py (apt-get install python3-venv)"
      exit 77
    fi
  fi
}
