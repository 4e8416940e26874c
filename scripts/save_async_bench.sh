#!/usr/bin/env bash
# The training stall of a checkpoint save, synchronous against --save-async (docs/checkpoints.md,
# "Asynchronous saves"): the same model trained twice at 2 ranks, saving after every step, and the
# stall of each save side by side — the time the training was blocked: the whole write (fsyncs and
# manifest included) for a synchronous save; the wait for the previous background write, the
# snapshot copy and a commit made after a step for an asynchronous one — with the background write's time and the param_hash of
# both runs (which must agree). The default model is a Llama shape of 151M parameters
# (16 layers, width 768, 12 heads, byte vocabulary): its checkpoint is 1.82 GB, 0.91 GB per rank,
# and the run needs ~4 GB in all (model states, the snapshot, activations).
# usage: bash scripts/save_async_bench.sh [--steps N] [--layers L] [--width C] [--heads H]
# Environment: ZS_BUILD_DIR (build), ZS_PYTHON (/usr/bin/python3), SAVE_ROOT (a directory on the
# disk to measure; default a temporary one under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=4 layers=16 width=768 heads=12
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --heads) heads=$2; shift 2 ;;
    *) echo "save_async_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=${ZS_BUILD_DIR:-build}
py=${ZS_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${SAVE_ROOT:-/tmp}/save_async_bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
model=(--family llama --layers "$layers" --width "$width" --heads "$heads" --context 128 --batch 1
       --threads 1 --zero-stage 3 --steps "$steps" --warmup 0 --eval-every 0 --sample-tokens 0
       --save-every 1 --keep 2)
echo "save_async_bench: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), saving into $work ($(df -h "$work" | awk 'NR == 2 {print $1}'))"
for mode in sync async; do
  extra=()
  [ "$mode" = async ] && extra=(--save-async)
  OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none "${root[@]}" -np 2 "$build/bin/zs_train" \
    "${model[@]}" --save-dir "$work/$mode" --json-log "$work/$mode.jsonl" "${extra[@]}" \
    > "$work/$mode.txt" 2>&1 || { cat "$work/$mode.txt"; echo "save_async_bench: $mode run failed" >&2; exit 1; }
  rm -rf "${work:?}/$mode"
done
"$py" - "$work/sync.jsonl" "$work/async.jsonl" <<'PY'
import json, sys
def records(path):
    recs = [json.loads(line) for line in open(path)]
    saves = {r["step"]: r for r in recs if r["type"] == "save"}
    final = next(r for r in recs if r["type"] == "final")
    return saves, final
s_saves, s_final = records(sys.argv[1])
a_saves, a_final = records(sys.argv[2])
print(f"{s_final['params']} parameters, 2 ranks, ZeRO-3; checkpoint {s_saves[max(s_saves)]['bytes'] / 1e9:.2f} GB")
print(f"{'step':>4} | {'sync stall s':>12} | {'async stall s':>13} {'(wait':>7} {'+ snapshot':>10} {'+ commit)':>9} | {'async write s':>13} | ratio")
for k in sorted(s_saves):
    s, a = s_saves[k], a_saves[k]
    print(f"{k:>4} | {s['stall_s']:>12.3f} | {a['stall_s']:>13.3f} {a['waited_s']:>7.3f} {a['snapshot_s']:>10.3f} {a['commit_s']:>9.3f} | "
          f"{a['write_s']:>13.3f} | {a['stall_s'] / s['stall_s']:.3f}")
last = a_saves[max(a_saves)]
print(f"end of run: waited {last['final_wait_s']:.3f} s for the last background write")
ok = s_final["param_hash"] == a_final["param_hash"]
print(f"param_hash sync {s_final['param_hash']}, async {a_final['param_hash']}: {'the same' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
