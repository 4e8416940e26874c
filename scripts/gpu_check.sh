#!/usr/bin/env bash
# Builds and checks the CUDA backend on a GPU machine that has no network: the device tool's
# machine (docs/gpu.md, "Checking on a GPU"). Run it from the repository root THERE, after
# `bash scripts/gpu_deps.sh` HERE has filled .gpu-deps/ (carried along: carry [".gpu-deps"]).
#
#   bash scripts/gpu_check.sh all            build, then test and bench (one call, ~10 min)
#   bash scripts/gpu_check.sh build          unpack + configure + build only
#   bash scripts/gpu_check.sh test bench     on a build made by an earlier call (carry the
#                                            build folder too); never rebuilds
#   bash scripts/gpu_check.sh env            unpack and print the environment only
#
# Modes: env (always done), build, test (a: ctest of the CUDA tests), bench (b: bench_gemm_cuda,
# c: GPU-vs-CPU loss curves, d: ZeRO-3 GPT-2-small tokens/s and MFU); all = build test bench.
# Every step's log is tee'd into $OUT (./out when OUT is unset): summary.txt (environment and the
# table of steps), build.log, ctest.log, bench_gemm.log, loss_curve.log, zero3.log and
# jsonl.tar.gz (the zs_train JSON logs). A failed step is recorded and the next one runs; the exit
# status is 0 only when every step ran and passed.
#
# The .deb files are unpacked with dpkg-deb -x (or ar + tar) into a private prefix, never into /:
# CMake finds them through CMAKE_PREFIX_PATH, Open MPI (relocated) through OPAL_PREFIX,
# PMIX_INSTALL_PREFIX/PMIX_PKGLIBDIR/PMIX_PKGDATADIR and LD_LIBRARY_PATH; mpirun runs with
# --allow-run-as-root --oversubscribe (and OMPI_MCA_plm=isolated where there is no ssh).
# NCCL: ZS_NCCL_ROOT if set, else the CUDA toolkit, else the pip wheel nvidia-nccl-cu* in
# python3's site-packages (nvidia/nccl), else the system.
#
# Without a visible GPU (nvidia-smi), it says so at the start, builds (build/all), and stops
# before the GPU steps; ZS_FORCE_GPU_STEPS=1 runs them anyway (they then skip or fail cleanly).
#
# Environment: OUT, ZS_GPU_BUILD_DIR (build-gpu), ZS_DEPS_DIR (.gpu-deps), ZS_DEPS_PREFIX
# (/opt/zsdeps), ZS_NCCL_ROOT, ZS_CUDA_ARCH (default: the GPU's compute capability, else 90),
# ZS_JOBS (nproc), ZS_GPU_TARGETS (all: every target; default only what the checks run),
# ZS_GPU_BUDGET (seconds this call may take, default 570: each step's timeout is what is left),
# ZS_LOSS_STEPS (100), ZS_Z3_STEPS (30), ZS_GPU_PRUNE (1: after building, delete object files and
# static libraries, for a build folder too big to carry; it then cannot be rebuilt incrementally),
# ZS_FORCE_GPU_STEPS, ZS_REV (the revision to record where there is no .git).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD

modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(all)
want_build=0 want_test=0 want_bench=0
for m in "${modes[@]}"; do
  case "$m" in
    all) want_build=1 want_test=1 want_bench=1 ;;
    build) want_build=1 ;;
    test) want_test=1 ;;
    bench) want_bench=1 ;;
    env) ;;
    *) echo "usage: bash scripts/gpu_check.sh [all|build|test|bench|env]..." >&2; exit 2 ;;
  esac
done

out=${OUT:-$root/out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build_dir=${ZS_GPU_BUILD_DIR:-build-gpu}
deps_dir=${ZS_DEPS_DIR:-.gpu-deps}
prefix=${ZS_DEPS_PREFIX:-/opt/zsdeps}
jobs=${ZS_JOBS:-$(nproc)}
budget=${ZS_GPU_BUDGET:-570}
summary=$out/summary.txt
: >"$summary"

on_path() {  # an executable file NAME on PATH (bash's `command -v` also reports non-executables)
  local d
  local IFS=:
  for d in $PATH; do [ -f "$d/$1" ] && [ -x "$d/$1" ] && return 0; done
  return 1
}
say() { echo "== $*" | tee -a "$summary"; }
note() { echo "$*" | tee -a "$summary"; }

# ---- step bookkeeping -----------------------------------------------------------------------
step_names=() step_status=() step_figures=()
record() {  # record NAME STATUS FIGURE
  step_names+=("$1") step_status+=("$2") step_figures+=("$3")
  note "-- step $1: $2${3:+ ($3)}"
}
time_left() { echo $((budget - SECONDS)); }
# run_logged LOG SECONDS CMD...: runs CMD under a timeout, appending its output to LOG and the
# terminal; returns CMD's status (124 on timeout).
run_logged() {
  local log=$1 t=$2
  shift 2
  echo "\$ $*" | tee -a "$log"
  timeout --kill-after=15 "$t" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "[exit $rc after ${SECONDS}s of this call]" | tee -a "$log"
  return "$rc"
}
# step_timeout CAP: the smaller of CAP and what is left of the budget (at least 1).
step_timeout() {
  local left
  left=$(time_left)
  [ "$left" -gt "$1" ] && left=$1
  [ "$left" -lt 1 ] && left=1
  echo "$left"
}
status_of() {  # status_of RC -> pass|fail (exit RC)|timeout
  case "$1" in
    0) echo pass ;;
    124 | 137) echo timeout ;;
    *) echo "fail (exit $1)" ;;
  esac
}

finish() {
  local ok=1 i
  for i in "${!step_names[@]}"; do
    [ "${step_status[$i]}" = pass ] || ok=0
  done
  {
    echo
    echo "== summary ($(date -u +%Y-%m-%dT%H:%MZ), ${SECONDS}s; logs in $out)"
    printf '%-22s %-28s %s\n' step status figure
    for i in "${!step_names[@]}"; do
      printf '%-22s %-28s %s\n' "${step_names[$i]}" "${step_status[$i]}" "${step_figures[$i]}"
    done
  } | tee -a "$summary"
  if compgen -G "$out/*.jsonl" >/dev/null; then
    (cd "$out" && tar -czf jsonl.tar.gz ./*.jsonl && rm -f ./*.jsonl)
  fi
  [ "$ok" = 1 ] && exit 0
  exit 1
}

# ---- environment -----------------------------------------------------------------------------
say "zeroshard gpu_check: modes ${modes[*]}, repo $root, out $out, budget ${budget}s"
# A copy of the working tree may come without .git: ZS_REV (the commit, written into the command)
# records the revision there.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  note "git: $(git -C "$root" log -1 --format='%h %s')" \
    "$(git -C "$root" status --porcelain 2>/dev/null | grep -qv '^??' && echo '(+ local changes)')"
else
  note "git: no .git here; revision ${ZS_REV:-not given (ZS_REV=<commit> records it)}"
fi
# shellcheck disable=SC1091
note "host: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(nproc) cores, uid $(id -u)"

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 &&
  gpus=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version \
    --format=csv,noheader 2>&1) && [ -n "$gpus" ]; then
  have_gpu=1
  note "GPUs (name, compute capability, memory, driver):"
  while IFS= read -r g; do note "  $g"; done <<<"$gpus"
else
  note "NO GPU: nvidia-smi $(command -v nvidia-smi >/dev/null 2>&1 && echo "lists none (${gpus:-})" ||
    echo "not found"); the GPU steps will not run (ZS_FORCE_GPU_STEPS=1 runs them anyway)"
fi
run_gpu_steps=$have_gpu
[ "${ZS_FORCE_GPU_STEPS:-0}" = 1 ] && run_gpu_steps=1

arch=${ZS_CUDA_ARCH:-}
if [ -z "$arch" ] && [ "$have_gpu" = 1 ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' |
    sort -u | paste -sd';')
fi
[ -n "$arch" ] || arch=90

nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
cxx=${ZS_CXX:-$(command -v g++ || command -v c++ || true)}
note "nvcc: ${nvcc:-NOT FOUND} $([ -n "$nvcc" ] && "$nvcc" --version | grep -o 'release [0-9.]*')"
note "c++: ${cxx:-NOT FOUND} $([ -n "$cxx" ] && "$cxx" --version | head -1)"
note "cmake: $(cmake --version 2>/dev/null | head -1 || echo NOT FOUND);" \
  "ninja: $(ninja --version 2>/dev/null || echo NOT FOUND);" \
  "python3: $(python3 --version 2>&1 | cut -d' ' -f2)"
note "CUDA architectures: $arch"

# ---- unpack the .deb files into the prefix ---------------------------------------------------
# Re-extracted when the set changes (MANIFEST.txt differs); fast otherwise.
unpack_deb() {  # unpack_deb DEB DIR
  if on_path dpkg-deb; then
    dpkg-deb -x "$1" "$2"
  else
    local member
    member=$(ar t "$1" | grep '^data\.tar') || return 1
    case "$member" in
      *.xz) ar p "$1" "$member" | tar -xJ -C "$2" ;;
      *.zst) ar p "$1" "$member" | tar --zstd -x -C "$2" ;;
      *.gz) ar p "$1" "$member" | tar -xz -C "$2" ;;
      *) ar p "$1" "$member" | tar -x -C "$2" ;;
    esac
  fi
}
unpack() {
  if ! compgen -G "$deps_dir/*.deb" >/dev/null; then
    note "no .deb files in $deps_dir: run scripts/gpu_deps.sh on the networked machine and carry" \
      "$deps_dir along; using what the system has"
    return 1
  fi
  if [ -f "$prefix/MANIFEST.txt" ] && cmp -s "$prefix/MANIFEST.txt" "$deps_dir/MANIFEST.txt"; then
    note "deps: $prefix already holds this .gpu-deps set"
  else
    rm -rf "$prefix"
    mkdir -p "$prefix/bin" "$prefix/fallback-root" "$prefix/fallback-lib"
    local d
    for d in "$deps_dir"/*.deb; do unpack_deb "$d" "$prefix" || { note "unpack failed: $d"; return 1; }; done
    for d in "$deps_dir"/fallback/*.deb; do
      [ -e "$d" ] && { unpack_deb "$d" "$prefix/fallback-root" || return 1; }
    done
    local ml=$prefix/usr/lib/x86_64-linux-gnu
    # Links Debian's maintainer scripts (update-alternatives) would make.
    ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$ml/libpsm_infinipath.so.1"
    ln -sf ../usr/bin/opal_wrapper "$prefix/bin/mpicc"
    ln -sf ../usr/bin/orterun "$prefix/bin/mpirun"
    ln -sf ../usr/bin/orterun "$prefix/bin/mpiexec"
    ln -sf ../usr/bin/ompi_info "$prefix/bin/ompi_info"
    cp "$deps_dir/MANIFEST.txt" "$prefix/MANIFEST.txt"
    note "deps: unpacked $(find "$deps_dir" -name '*.deb' | wc -l) .deb files into $prefix"
  fi
  # Fallback libraries only where the system lacks the soname.
  rm -f "$prefix"/fallback-lib/*
  local f so used=() ldconfig
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  while IFS= read -r f; do
    so=$(basename "$f")
    if ! { "$ldconfig" -p 2>/dev/null | grep -qE "^[[:space:]]+${so//./\\.} " ||
      [ -e "/usr/lib/x86_64-linux-gnu/$so" ] || [ -e "/lib/x86_64-linux-gnu/$so" ]; }; then
      ln -sf "$f" "$prefix/fallback-lib/$so"
      used+=("$so")
    fi
  done < <(find "$prefix/fallback-root" -name 'lib*.so.[0-9]' \( -type f -o -type l \))
  note "deps: fallback libraries used (missing from the system): ${used[*]:-none}"
  return 0
}

ml=$prefix/usr/lib/x86_64-linux-gnu
if unpack; then
  export OPAL_PREFIX=$prefix/usr
  # PMIx (Debian's sits in its own folder): its components and help files, relocated.
  export PMIX_INSTALL_PREFIX=$ml/pmix2 PMIX_PKGLIBDIR=$ml/pmix2/lib/pmix
  export PMIX_PKGDATADIR=$ml/pmix2/share/pmix
  export PATH=$prefix/bin:$PATH
  export LD_LIBRARY_PATH=$ml:$ml/openmpi/lib:$prefix/fallback-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  # Debian's defaults (no UCX/OFI/openib transports), read from the prefix instead of /etc.
  export OMPI_MCA_mca_base_param_files=$prefix/etc/openmpi/openmpi-mca-params.conf
  mpi_hints=(-DMPI_C_COMPILER="$prefix/bin/mpicc" -DMPIEXEC_EXECUTABLE="$prefix/bin/mpirun")
  deps_ok=1
else
  mpi_hints=()
  deps_ok=0
fi
# Containers: no ptrace-based single copy; root allowed; without ssh/rsh, Open MPI's rsh launcher
# refuses to start even on one node ("plm_rsh_agent ... could not be found"): launch locally.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
if ! on_path ssh && ! on_path rsh; then
  export OMPI_MCA_plm=isolated
  note "no ssh/rsh: OMPI_MCA_plm=isolated (mpirun launches on this node only)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)
note "mpirun: $(command -v mpirun || echo NOT FOUND) ($(ompi_info --parsable 2>/dev/null |
  grep -m1 '^ompi:version:full:' | cut -d: -f4 || true)," \
  "prefix $(ompi_info --path prefix --parsable 2>/dev/null | sed 's/.*://' || true))"

# ---- NCCL ------------------------------------------------------------------------------------
nccl_root="" nccl_lib=""
nccl_try() {  # nccl_try ROOT: sets nccl_root/nccl_lib when ROOT has include/nccl.h and the library
  local r=$1 l
  [ -n "$r" ] && [ -f "$r/include/nccl.h" ] || return 1
  for l in "$r"/lib/libnccl.so "$r"/lib64/libnccl.so "$r"/lib/x86_64-linux-gnu/libnccl.so \
    "$r"/lib/libnccl.so.2 "$r"/lib64/libnccl.so.2 "$r"/lib/x86_64-linux-gnu/libnccl.so.2; do
    if [ -e "$l" ]; then
      nccl_root=$r nccl_lib=$l
      return 0
    fi
  done
  return 1
}
pip_nccl_roots() {
  python3 - <<'EOF' 2>/dev/null
import os, site, sys
dirs = list(sys.path)
try:
    dirs += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
seen = set()
for d in dirs:
    if not d or d in seen or not os.path.isdir(os.path.join(d, "nvidia")):
        continue
    seen.add(d)
    for sub, _, files in os.walk(os.path.join(d, "nvidia")):
        if "nccl.h" in files and os.path.basename(sub) == "include":
            print(os.path.dirname(sub))
EOF
}
find_nccl() {
  local r
  for r in "${ZS_NCCL_ROOT:-}" "${NCCL_ROOT:-}"; do nccl_try "$r" && return 0; done
  local cuda_root
  cuda_root=$(dirname "$(dirname "${nvcc:-/usr/local/cuda/bin/nvcc}")")
  for r in "$cuda_root" "$cuda_root/targets/x86_64-linux"; do nccl_try "$r" && return 0; done
  while IFS= read -r r; do nccl_try "$r" && return 0; done < <(pip_nccl_roots)
  for r in /usr /usr/local; do nccl_try "$r" && return 0; done
  return 1
}
if find_nccl; then
  nccl_ver=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v=v (v?".":"") $3} END{print v}' \
    "$nccl_root/include/nccl.h")
  note "NCCL: $nccl_ver, $nccl_lib (headers $nccl_root/include)"
  nccl_hints=(-DZS_NCCL_ROOT="$nccl_root" -DZS_NCCL_INCLUDE_DIR="$nccl_root/include"
              -DZS_NCCL_LIBRARY="$nccl_lib")
else
  note "NCCL: NOT FOUND (set ZS_NCCL_ROOT to a folder with include/nccl.h and lib/libnccl.so*)"
  nccl_hints=()
fi

# ---- build -----------------------------------------------------------------------------------
bdir=$root/$build_dir
[ "${build_dir#/}" != "$build_dir" ] && bdir=$build_dir
blog=$out/build.log

# The binaries the checks run: every executable of the CUDA tests ctest would run (a one-process
# test's target has the test's name; ctest names no command for it before it is built), and the
# two programs.
check_targets() {
  ctest --test-dir "$bdir" -N -R '^cuda_|core_cuda_probe' --show-only=json-v1 2>/dev/null |
    python3 -c '
import json, os, sys
seen = []
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    exes = [os.path.basename(a) for a in cmd if a.startswith(sys.argv[1] + "/")]
    for b in exes or ([] if cmd else [t["name"]]):
        if b not in seen:
            seen.append(b)
print(" ".join(seen + ["zs_train", "bench_gemm_cuda"]))' "$bdir"
}

if [ "$want_build" = 1 ]; then
  : >"$blog"
  if [ -z "$nvcc" ]; then
    record configure "fail (no nvcc)" ""
  else
    generator=(-G Ninja)
    command -v ninja >/dev/null || generator=(-G "Unix Makefiles")
    run_logged "$blog" "$(step_timeout 300)" cmake -S "$root" -B "$bdir" "${generator[@]}" \
      -DCMAKE_BUILD_TYPE=Release -DZS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DCMAKE_CUDA_COMPILER="$nvcc" ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} \
      ${cxx:+-DCMAKE_CUDA_HOST_COMPILER="$cxx"} "${mpi_hints[@]}" "${nccl_hints[@]}"
    rc=$?
    record configure "$(status_of $rc)" "deps $([ $deps_ok = 1 ] && echo "$prefix" || echo system), arch $arch"
    if [ $rc = 0 ]; then
      if [ "${ZS_GPU_TARGETS:-}" = all ]; then
        targets=(all)
      else
        read -r -a targets <<<"$(check_targets)"
        [ ${#targets[@]} -gt 0 ] || targets=(all)
      fi
      t0=$SECONDS
      run_logged "$blog" "$(step_timeout "$budget")" cmake --build "$bdir" -j "$jobs" --target "${targets[@]}"
      rc=$?
      record build "$(status_of $rc)" "${#targets[@]} targets, $((SECONDS - t0))s at -j$jobs"
      note "build: $build_dir is $(du -sh "$bdir" | cut -f1)"
      if [ $rc = 0 ] && [ "${ZS_GPU_PRUNE:-0}" = 1 ]; then
        find "$bdir" \( -name '*.o' -o -name '*.a' -o -name '*.o.d' \) -delete
        touch "$bdir/.pruned"
        note "build: pruned object files and static libraries; $build_dir is $(du -sh "$bdir" |
          cut -f1) (carry it to a later call running test/bench; it cannot be rebuilt incrementally)"
      fi
    fi
  fi
fi

if [ "$want_test$want_bench" = 00 ]; then finish; fi
if [ ! -x "$bdir/bin/zs_train" ]; then
  record prerequisites "fail" "no build in $build_dir: run 'gpu_check.sh build' (or all) first"
  finish
fi
if [ "$run_gpu_steps" != 1 ]; then
  record gpu-steps "skipped (no GPU)" "nvidia-smi shows no device; build done, nothing run on a GPU"
  finish
fi

# A build folder carried from another checkout path (or renamed): ctest files name the old paths.
old_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$bdir/CMakeCache.txt" 2>/dev/null)
old_bdir=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$bdir/CMakeCache.txt" 2>/dev/null)
if [ -n "$old_bdir" ] && [ "$old_bdir" != "$bdir" ]; then
  note "build folder configured as $old_bdir, now $bdir: rewriting CTestTestfile paths"
  find "$bdir" -name CTestTestfile.cmake -exec sed -i "s#$old_bdir#$bdir#g" {} +
fi
if [ -n "$old_root" ] && [ "$old_root" != "$root" ]; then
  note "repository configured at $old_root, now $root: rewriting CTestTestfile paths"
  find "$bdir" -name CTestTestfile.cmake -exec sed -i "s#$old_root#$root#g" {} +
fi

# ---- a. the CUDA tests -----------------------------------------------------------------------
if [ "$want_test" = 1 ]; then
  tlog=$out/ctest.log
  : >"$tlog"
  run_logged "$tlog" "$(step_timeout 400)" ctest --test-dir "$bdir" -R '^cuda_|core_cuda_probe' \
    --output-on-failure
  rc=$?
  fig=$(grep -E 'tests passed|tests failed' "$tlog" | tail -1)
  nskip=$(grep -c '(Skipped)' "$tlog")
  record "a. ctest cuda" "$(status_of $rc)" "${fig:-no ctest summary}; $nskip skipped"
fi

if [ "$want_bench" = 1 ]; then
  # ---- b. GEMM benchmark ---------------------------------------------------------------------
  glog=$out/bench_gemm.log
  : >"$glog"
  for cfg in "bf16 768" "fp16 1600"; do
    read -r dt w <<<"$cfg"
    run_logged "$glog" "$(step_timeout 120)" "$bdir/bench/bench_gemm_cuda" --dtype "$dt" \
      --tokens 8192 --width "$w"
    rc=$?
    fig=$(awk -v dt="$dt" -v w="$w" -F'|' '
      /^# device/ {dev=1} dev && NF==4 && $2 ~ /[0-9]/ {
        split($2, t, " "); split($4, p, "("); sub(/%.*/, "", p[2]); sub(/ours /, "", p[2]);
        n++; s+=t[1]; if (min==""||t[1]<min) min=t[1]; if (t[1]>max) max=t[1];
        if (pmin==""||p[2]+0<pmin) pmin=p[2]+0 }
      END { if (n) printf "ours %.0f-%.0f TFLOP/s (mean %.0f), >= %d%% of best", min, max, s/n, pmin }' \
      <(sed -n "/--dtype $dt/,/\[exit/p" "$glog"))
    st=$(status_of $rc)
    if [ -z "$fig" ] && grep -q 'no CUDA device' "$glog"; then
      st="skipped" fig="no CUDA device"
    fi
    record "b. gemm $dt w$w" "$st" "$fig"
  done

  # ---- c. loss curve: GPU vs CPU, same seed and flags -----------------------------------------
  llog=$out/loss_curve.log
  : >"$llog"
  steps=${ZS_LOSS_STEPS:-100}
  for dt in bf16 fp32; do
    common=(--data "$root/data/corpus.txt" --steps "$steps" --seed 1234 --dtype "$dt"
            --eval-every 50 --sample-tokens 0 --log-every 10)
    rcs=""
    for dev in cuda cpu; do
      rm -f "$out/loss_${dt}_$dev.jsonl"
      run_logged "$llog" "$(step_timeout 150)" mpirun "${mpirun_flags[@]}" -np 1 \
        "$bdir/bin/zs_train" --device "$dev" "${common[@]}" \
        --json-log "$out/loss_${dt}_$dev.jsonl"
      rcs="$rcs $?"
    done
    tol=3e-2
    [ "$dt" = fp32 ] && tol=1e-3
    fig=$(python3 - "$out/loss_${dt}_cuda.jsonl" "$out/loss_${dt}_cpu.jsonl" "$tol" <<'EOF' 2>&1 | tee -a "$llog" | tail -1
import json, sys
def load(p):
    steps = {}
    try:
        for line in open(p):
            r = json.loads(line)
            if r.get("type", "step") == "step" and not r.get("final"):  # not the header
                steps[r["step"]] = r["loss"]
    except OSError:
        pass
    return steps
gpu, cpu = load(sys.argv[1]), load(sys.argv[2])
tol = float(sys.argv[3])
common = sorted(set(gpu) & set(cpu))
if not common:
    print(f"no common steps (gpu {len(gpu)}, cpu {len(cpu)} steps logged)")
    sys.exit(1)
print(f"{'step':>5} {'gpu loss':>10} {'cpu loss':>10} {'rel diff':>10}")
worst, worst_step = 0.0, 0
for s in common:
    d = abs(gpu[s] - cpu[s]) / max(abs(cpu[s]), 1e-12)
    if d > worst:
        worst, worst_step = d, s
    print(f"{s:5d} {gpu[s]:10.5f} {cpu[s]:10.5f} {d:10.2e}")
first10 = max(abs(gpu[s] - cpu[s]) / abs(cpu[s]) for s in common[:10])
verdict = "within" if worst <= tol else "ABOVE"
print(f"max rel diff {worst:.2e} at step {worst_step} ({verdict} {tol:g}), first 10 steps "
      f"{first10:.2e}, final loss gpu {gpu[common[-1]]:.4f} cpu {cpu[common[-1]]:.4f}, {len(common)} steps")
sys.exit(0 if worst <= tol else 3)
EOF
)
    crc=$?
    st=pass
    [ "$rcs" != " 0 0" ] && st="fail (zs_train exits$rcs)"
    [ "$st" = pass ] && [ "$crc" != 0 ] && st="check (diff > tol)"
    record "c. loss $dt gpu/cpu" "$st" "$fig"
  done

  # ---- d. ZeRO-3 throughput, GPT-2-small shape ------------------------------------------------
  zlog=$out/zero3.log
  : >"$zlog"
  rm -f "$out/zero3.jsonl"
  run_logged "$zlog" "$(step_timeout 240)" mpirun "${mpirun_flags[@]}" -np 1 \
    "$bdir/bin/zs_train" --device cuda --zero-stage 3 --dtype bf16 --layers 12 --heads 12 \
    --width 768 --context 1024 --batch 8 --steps "${ZS_Z3_STEPS:-30}" --eval-every 0 \
    --sample-tokens 0 --data "$root/data/corpus.txt" --json-log "$out/zero3.jsonl"
  rc=$?
  fig=$(python3 - "$out/zero3.jsonl" <<'EOF' 2>/dev/null
import json, sys
f = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
mem = f.get("memory_bytes", {}).get("total", 0) / 2**30
print(f"{f['tokens_per_s']:.0f} tok/s, {f['model_tflops']:.1f} TFLOP/s, MFU {100 * f['mfu']:.1f}%, "
      f"step {f['median_step_ms']:.1f} ms, final loss {f['loss']:.3f}, peak tracked {mem:.2f} GiB")
EOF
)
  record "d. zero3 gpt2-small" "$(status_of $rc)" "${fig:-no final JSON record}"
fi

finish
