#!/usr/bin/env bash
# Measures what a failure costs under zs_run (docs/reliability.md, "Automatic restart"): a
# world-invariant job whose rank is kill -9'd after step K, restarted by zs_run, once with disk
# checkpoints every 4 steps and once with a memory-tier checkpoint every step as well. Prints,
# per scenario, the step it failed after, the step resumed from, steps lost, the seconds from the
# kill to the relaunch's first step (measured here) and from mpirun's end to it (zs_run's log), and
# whether the final param_hash equals the uninterrupted run's.
#   scripts/restart_measure.sh [BUILD_DIR] [--np N] [--kill-after K] [--steps S]
# Other mpirun flags: MPIRUN_FLAGS (default: --oversubscribe --bind-to none, and
# --allow-run-as-root as root).
set -euo pipefail
build=${1:-build}
[ $# -gt 0 ] && shift
np=2 kill_after=14 steps=30
while [ $# -gt 0 ]; do
  case $1 in
    --np) np=$2; shift 2 ;;
    --kill-after) kill_after=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$(cd "$build/bin" && pwd)
flags=(${MPIRUN_FLAGS:---oversubscribe --bind-to none})
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
margs=()
for f in "${flags[@]}"; do margs+=("--mpirun-arg=$f"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_orte_tmpdir_base="$work/sessions"
inv=(--layers 2 --heads 2 --width 64 --context 32 --batch 2 --warmup 2 --eval-every 0
     --eval-batches 1 --sample-tokens 0 --threads 1 --world-invariant --global-micro-batches 8
     --log-every 1 --steps "$steps")
mpirun "${flags[@]}" -np "$np" "$bin/zs_train" "${inv[@]}" > "$work/ref.txt" 2>&1
ref=$(grep -oE 'param_hash: [0-9a-f]+' "$work/ref.txt" | awk '{print $2}')
printf '%-30s | %6s | %7s | %4s | %14s | %17s | %s\n' scenario failed resumed lost \
  "kill->step (s)" "mpirun end->step" "param_hash = uninterrupted"
for scenario in disk memory; do
  ck="$work/ck-$scenario"
  extra=(--save-every 4)
  [ "$scenario" = memory ] && extra+=(--save-memory-every 1)
  "$bin/zs_run" --np "$np" "${margs[@]}" --log "$work/$scenario.jsonl" -- "$bin/zs_train" \
    --save-dir "$ck" "${inv[@]}" "${extra[@]}" > "$work/$scenario.txt" 2>&1 &
  sup=$!
  until [ -e "$work/$scenario.txt" ] && grep -qE "^step +$kill_after/" "$work/$scenario.txt"; do sleep 0.05; done
  kill -9 "$(pgrep -f -- "^$bin/zs_train --save-dir $ck " | tail -1)"
  t_kill=$(date +%s.%N)
  # The relaunch's first step line: the first after the second launch.
  until awk '/zs_run: launch 2/ {l = 1} l && /^step +[0-9]+\// {f = 1} END {exit !f}' \
    "$work/$scenario.txt"; do sleep 0.02; done
  t_step=$(date +%s.%N)
  wait "$sup"
  python3 - "$work/$scenario.jsonl" "$scenario" "$t_kill" "$t_step" "$ref" \
    "$(grep -oE 'param_hash: [0-9a-f]+' "$work/$scenario.txt" | awk '{print $2}')" <<'PY'
import json, sys
log, name, t_kill, t_step, ref, got = sys.argv[1:]
r = [json.loads(l) for l in open(log)]
f = next(x for x in r if x["event"] == "failure")
rec = next(x for x in r if x["event"] == "recovery")
label = "disk every 4" if name == "disk" else "disk every 4 + memory every 1"
print(f"{label:<30} | {f['last_step']:>6} | {rec['resumed_step']:>7} | {rec['steps_lost']:>4} | "
      f"{float(t_step) - float(t_kill):>14.2f} | {rec['seconds_to_first_step']:>17.2f} | "
      f"{'yes' if ref == got else 'NO'} ({got})")
PY
done
