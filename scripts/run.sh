#!/usr/bin/env bash
# One entry point for a fresh Debian bookworm machine (as root, or with sudo available):
#   bash scripts/run.sh train [zs_train flags...]   install, build Release, run the main job
#   bash scripts/run.sh test                         install, build Release, run every test
#   bash scripts/run.sh build                        install and build only
# Environment: ZS_BUILD_DIR (default build), ZS_NP (ranks for `train`, default 2),
# ZS_CUDA (AUTO|ON|OFF, default AUTO), ZS_JOBS (build jobs, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-train}
[ $# -gt 0 ] && shift

# ocl-icd-opencl-dev: libdnnl-dev only recommends it, but its CMake config requires OpenCL.
packages=(build-essential cmake ninja-build pkg-config openmpi-bin libopenmpi-dev libeigen3-dev
          libboost-program-options-dev libgtest-dev libfmt-dev nlohmann-json3-dev libxxhash-dev
          libdnnl-dev ocl-icd-opencl-dev clang libclang-rt-14-dev clang-format python3 python3-venv)

# For `test`: Debian's PyTorch, the reference the gradient parity check compares against,
# matplotlib for the plot script's test (zs_train_plot), and iproute2 for the simulated cluster
# (scripts/sim_cluster.sh: network namespaces; its tests skip where they cannot be made).
[ "$mode" = test ] && packages+=(python3-torch python3-matplotlib iproute2)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build_dir=${ZS_BUILD_DIR:-build}
python_flag=()
# The interop checks load our safetensors exports with the reference loader from PyPI; without
# network access they are skipped, not failed.
interop_python() {
  local venv="$build_dir/pyenv"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >/dev/null 2>&1 || return 0
  fi
  "$venv/bin/python" -c 'import safetensors, numpy' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q safetensors numpy >/dev/null 2>&1 || true
  python_flag=(-DZS_PYTHON="$(cd "$venv/bin" && pwd)/python")
}
build() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZS_CUDA="${ZS_CUDA:-AUTO}" \
    "${python_flag[@]}" >/dev/null
  cmake --build "$build_dir" -j "${ZS_JOBS:-$(nproc)}"
}

mpirun_flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)

install_missing
mkdir -p "$build_dir"
[ "$mode" = test ] && interop_python
build
case "$mode" in
  build) ;;
  train)
    exec mpirun "${mpirun_flags[@]}" -np "${ZS_NP:-2}" "$build_dir/bin/zs_train" "$@" ;;
  test)
    # The parsers' short fuzz run first, so that ctest's summary closes the output.
    if [ -x fuzz/run_fuzz.sh ]; then bash fuzz/run_fuzz.sh; fi
    # The Eigen GEMM path (builds without oneDNN): the layers, the GPT and the memory plan's
    # exactness against it.
    if [ "${ZS_SKIP_EIGEN:-0}" != 1 ]; then
      cmake -S . -B "$build_dir-eigen" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZS_CUDA=OFF \
        -DZS_NN_USE_DNNL=OFF >/dev/null
      cmake --build "$build_dir-eigen" -j "${ZS_JOBS:-$(nproc)}" --target test_nn_layers test_nn_llama_layers \
        test_nn_gpt test_nn_gpt_grad test_nn_gpt_arch test_nn_llama_reference plan_engine_test
      (cd "$build_dir-eigen" && ctest --output-on-failure -j "${ZS_TEST_JOBS:-2}" \
        -R '^(test_nn_|plan_engine_test)')
    fi
    # AddressSanitizer + UndefinedBehaviorSanitizer over the suites that drive the engine, the
    # collectives, the checkpoints and the settings parser (docs/reliability.md). MPI's own
    # allocations are not ours to free at exit: leak checking is off.
    if [ "${ZS_SKIP_SANITIZE:-0}" != 1 ]; then
      sanitized=(engine_test param_group_test qwz_test hpz_test qgz_test agreement_test
                 device_path_test checkpoint_test collectives_mpi_test collectives_errors_test
                 layout_test core_settings_test
                 state_dtype_test)
      cmake -S . -B "$build_dir-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZS_CUDA=OFF \
        -DZS_SANITIZE=address,undefined >/dev/null
      cmake --build "$build_dir-asan" -j "${ZS_JOBS:-$(nproc)}" --target "${sanitized[@]}"
      regex=$(IFS='|'; echo "^(${sanitized[*]})(_np[0-9]+)?$")
      (cd "$build_dir-asan" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --output-on-failure -j "${ZS_TEST_JOBS:-2}" -R "$regex")
    fi
    (cd "$build_dir" && ctest --output-on-failure -j "${ZS_TEST_JOBS:-2}" "$@") ;;
  *) echo "usage: bash scripts/run.sh train|test|build [args]" >&2; exit 2 ;;
esac
