#!/usr/bin/env bash
# zs_train held under misuse (issue 25), one case per ctest:
#   zs_train_hang_misuse.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   watchdog      2 ranks of a long run, rank 1 stopped (SIGSTOP) after the first step:
#                 --watchdog-timeout 5 ends the job within 15 s of the stop with a report naming
#                 the collective; ZS_WATCHDOG_S=5 without the flag does the same (the flag's
#                 default); ZS_WATCHDOG_S=5 --watchdog-timeout 0 leaves it running 15 s later
#                 (then the test ends it: SIGCONT, kill mpirun, no process left)
#   env_disagree  a ZS_* setting that differs on the last rank (ZS_COLLECTIVES_SHM,
#                 ZS_COLLECTIVES_SHM_PASS, ZS_FAKE_NODES, ZS_CHECK_COLLECTIVES, ZS_WATCHDOG_S,
#                 ONEDNN_MAX_CPU_ISA; at 2 ranks, and at 4 with rank 3 differing) is refused at
#                 start-up naming the variable and both values: one message, non-zero exit, no
#                 hang (ZS_MAX_ISA may differ: zs_train_finite_isa.sh isa_mix)
#   small_shm     /dev/shm of 64 KiB (a private mount namespace: needs root, exit 77 without):
#                 the shared-memory collectives are refused naming the bytes needed, the bytes
#                 free and ZS_COLLECTIVES_SHM=0, with no hang; with ZS_COLLECTIVES_SHM=0 the run
#                 completes
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
# The variables under test come from each case alone.
unset ZS_COLLECTIVES_SHM ZS_COLLECTIVES_SHM_PASS ZS_FAKE_NODES ZS_CHECK_COLLECTIVES ZS_MAX_ISA \
  ZS_FORCE_SCALAR ZS_WATCHDOG_S ONEDNN_MAX_CPU_ISA
# No evaluation and no sample: the steps are what these cases watch.
tiny=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --threads 1 --warmup 2
      --eval-every 0 --eval-batches 1 --sample-tokens 0)
# Each launch gets its own Open MPI session dir (concurrent launches collide otherwise), under one
# directory removed at exit, after the case's own cleanup.
sessions=$(mktemp -d)
at_exit() {
  [ "$(type -t cleanup)" = function ] && cleanup
  rm -rf "$sessions"
}
trap at_exit EXIT
session() { mktemp -d -p "$sessions"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

case "$case_name" in
  watchdog)
    mpid="" stopped=""
    cleanup() {  # ends what this case started: the stopped rank first, then mpirun
      [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
      if [ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null; then
        kill -TERM "$mpid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$mpid" 2>/dev/null
      fi
      [ -n "$mpid" ] && wait "$mpid" 2>/dev/null
      mpid="" stopped=""
    }
    # Starts a long 2-rank run (its own Open MPI session dir), waits for the first step line and
    # stops rank 1. Sets mpid, stopped, t_stop; the run's output goes to $work/$label.txt, the
    # watchdog's dumps under $work (TMPDIR).
    start_and_stop() {  # label [env assignments...] -- [zs_train flags...]
      local label=$1 tag="$work/$1.jsonl"
      shift
      local envs=()
      while [ "$1" != "--" ]; do envs+=("$1"); shift; done
      shift
      env "${envs[@]}" TMPDIR="$work" OMPI_MCA_orte_tmpdir_base="$(session)" "${mpi[@]}" -np 2 "$bin" \
        "${tiny[@]}" --steps 100000 --json-log "$tag" "$@" > "$work/$label.txt" 2>&1 &
      mpid=$!
      for _ in $(seq 600); do
        grep -qE '^step +1/100000' "$work/$label.txt" 2> /dev/null && break
        kill -0 "$mpid" 2>/dev/null || { cat "$work/$label.txt"; fail "$label: exited early"; }
        sleep 0.1
      done
      grep -qE '^step +1/100000' "$work/$label.txt" || fail "$label: no first step in 60 s"
      # The ranks: mpirun's children whose command line holds this run's unique log path.
      local pid rank1=""
      for pid in $(pgrep -P "$mpid" -f -- "$tag"); do
        tr '\0' '\n' < "/proc/$pid/environ" | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$pid
      done
      [ -n "$rank1" ] || { pgrep -a -P "$mpid"; fail "$label: rank 1's process not found"; }
      kill -STOP "$rank1"
      stopped=$rank1 t_stop=$(now)
      echo "$label: stopped rank 1 (pid $rank1) after its first step"
    }
    # Waits up to $2 s for mpirun to end; sets rc and took (seconds since the stop).
    wait_end() {  # label limit-seconds
      local deadline
      deadline=$(awk -v t="$(now)" -v l="$2" 'BEGIN { printf "%.1f", t + l }')
      while kill -0 "$mpid" 2>/dev/null &&
        awk -v t="$(now)" -v d="$deadline" 'BEGIN { exit !(t < d) }'; do
        sleep 0.1
      done
      took=$(secs "$t_stop" "$(now)")
      if kill -0 "$mpid" 2>/dev/null; then
        rc=running
      else
        wait "$mpid"
        rc=$?
        mpid="" stopped=""
      fi
    }
    expect_fired() {  # label: ended within 15 s of the stop, the report naming the collective
      local label=$1
      wait_end "$label" 15
      [ "$rc" != running ] || { cat "$work/$label.txt"; fail "$label: still running ${took} s after the stop"; }
      [ "$rc" -ne 0 ] || fail "$label: exit 0"
      local fired
      fired=$(grep -m1 -E 'zeroshard watchdog: rank 0: seq [0-9]+ [a-z_]+ [0-9]+ B [a-z0-9]+.* has not completed after [0-9.]+ s \(timeout 5\.0 s\)' "$work/$label.txt")
      [ -n "$fired" ] || { cat "$work/$label.txt"; fail "$label: no report from rank 0 naming the collective with timeout 5.0 s"; }
      grep -q "zeroshard watchdog: rank 1: " "$work/$label.txt" ||
        { cat "$work/$label.txt"; fail "$label: the report does not say where rank 1 is"; }
      echo "$label: ended ${took} s after the stop, exit $rc: ${fired#zeroshard watchdog: }"
    }
    start_and_stop flag -- --watchdog-timeout 5
    expect_fired flag
    start_and_stop env_default ZS_WATCHDOG_S=5 --
    expect_fired env_default
    start_and_stop flag_off ZS_WATCHDOG_S=5 -- --watchdog-timeout 0
    wait_end flag_off 15
    [ "$rc" = running ] || { cat "$work/flag_off.txt"; fail "flag_off: ended (exit $rc) ${took} s after the stop"; }
    ! grep -q "zeroshard watchdog" "$work/flag_off.txt" || { cat "$work/flag_off.txt"; fail "flag_off: the watchdog spoke"; }
    echo "flag_off: still running ${took} s after the stop, no watchdog line"
    cleanup
    left=$(pgrep -f -- "$work/" | tr '\n' ' ')
    [ -z "$left" ] || { pgrep -a -f -- "$work/"; fail "processes left: $left"; }
    echo "flag_off: ended by the test, no process left"
    ;;
  env_disagree)
    # The last rank runs under `env VAR=value`; the others with the variable unset.
    refused() {  # np VAR value expected-text
      local np=$1 var=$2 value=$3 text=$4 t0 rc
      t0=$(now)
      OMPI_MCA_orte_tmpdir_base="$(session)" timeout 60 "${mpi[@]}" \
        -np $((np - 1)) "$bin" "${tiny[@]}" --steps 4 : \
        -np 1 env "$var=$value" "$bin" "${tiny[@]}" --steps 4 > "$work/d.txt" 2>&1
      rc=$?
      [ $rc -ne 0 ] || fail "$var at $np ranks: exit code 0"
      [ $rc -ne 124 ] || { cat "$work/d.txt"; fail "$var at $np ranks: hung (60 s)"; }
      grep -qF -- "$text" "$work/d.txt" || { cat "$work/d.txt"; fail "$var at $np ranks: no '$text'"; }
      n=$(grep -c "zs_train: error" "$work/d.txt")
      [ "$n" -eq 1 ] || { cat "$work/d.txt"; fail "$var at $np ranks: $n error lines, expected one"; }
      echo "$var at $np ranks: exit $rc in $(secs "$t0" "$(now)") s: $(grep 'zs_train: error' "$work/d.txt")"
    }
    e="zs_train: error: environment: ranks disagree on"
    refused 2 ZS_COLLECTIVES_SHM 0 "$e ZS_COLLECTIVES_SHM: 1 on rank 0, 0 on rank 1"
    refused 2 ZS_COLLECTIVES_SHM_PASS 65536 "$e ZS_COLLECTIVES_SHM_PASS: 524288 on rank 0, 65536 on rank 1"
    refused 2 ZS_FAKE_NODES 2 "$e ZS_FAKE_NODES: 0 on rank 0, 2 on rank 1"
    refused 2 ZS_CHECK_COLLECTIVES 1 "$e ZS_CHECK_COLLECTIVES: 0 on rank 0, 1 on rank 1"
    refused 2 ZS_WATCHDOG_S 60 "$e ZS_WATCHDOG_S: unset on rank 0, 60 on rank 1"
    refused 2 ONEDNN_MAX_CPU_ISA AVX2 "$e ONEDNN_MAX_CPU_ISA: unset on rank 0, AVX2 on rank 1"
    refused 4 ZS_COLLECTIVES_SHM 0 "$e ZS_COLLECTIVES_SHM: 1 on rank 0, 0 on rank 3"
    refused 4 ZS_FAKE_NODES 2 "$e ZS_FAKE_NODES: 0 on rank 0, 2 on rank 3"
    # Agreeing ranks still run.
    OMPI_MCA_orte_tmpdir_base="$(session)" timeout 120 env ZS_COLLECTIVES_SHM=0 \
      "${mpi[@]}" -np 2 "$bin" "${tiny[@]}" --steps 2 > "$work/ok.txt" 2>&1 ||
      { cat "$work/ok.txt"; fail "ZS_COLLECTIVES_SHM=0 on every rank did not run"; }
    echo "ZS_COLLECTIVES_SHM=0 on every rank: runs"
    ;;
  small_shm)
    command -v unshare > /dev/null || { echo "SKIP: no unshare"; exit 77; }
    unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /dev/shm' 2> /dev/null ||
      { echo "SKIP: cannot mount a private /dev/shm (needs root and mount namespaces)"; exit 77; }
    small() {  # out [env assignments...]: 2 ranks on a 64 KiB /dev/shm of their own
      local out=$1
      shift
      OMPI_MCA_orte_tmpdir_base="$(session)" timeout 120 unshare -m env "$@" sh -c \
        'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$@"' sh \
        "${mpi[@]}" -np 2 "$bin" "${tiny[@]}" --steps 2 > "$out" 2>&1
    }
    t0=$(now)
    small "$work/shm.txt"
    rc=$?
    took=$(secs "$t0" "$(now)")
    [ $rc -ne 124 ] || { cat "$work/shm.txt"; fail "hung (120 s) on a 64 KiB /dev/shm"; }
    [ $rc -ne 0 ] || { cat "$work/shm.txt"; fail "exit 0 on a 64 KiB /dev/shm"; }
    msg=$(grep -m1 -E "zs_train: error: .*the window needs [0-9]+ bytes on /dev/shm .*only [0-9]+ bytes are free there.*ZS_COLLECTIVES_SHM=0" "$work/shm.txt")
    [ -n "$msg" ] || { cat "$work/shm.txt"; fail "no message naming the bytes needed, the bytes free and ZS_COLLECTIVES_SHM=0"; }
    echo "64 KiB /dev/shm: exit $rc after $took s: $msg"
    small "$work/noshm.txt" ZS_COLLECTIVES_SHM=0 || { cat "$work/noshm.txt"; fail "ZS_COLLECTIVES_SHM=0 did not run"; }
    grep -q "param_hash:" "$work/noshm.txt" || { cat "$work/noshm.txt"; fail "ZS_COLLECTIVES_SHM=0: no param_hash"; }
    echo "64 KiB /dev/shm with ZS_COLLECTIVES_SHM=0: runs"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS $case_name"
