#!/usr/bin/env bash
# Start-up time of zs_train at LLaMA-7B shape (32 layers, width 4096, 32 heads, FFN 11008,
# vocabulary 32000, context 256) with a LoRA over an int8 base under ZeRO-3, as a fine-tuning run
# starts: prints the phase lines ([Note: start-up lines] in apps/zs_train/main.cc: init, start-up
# since launch) and the wall time to the first step line.
#   bash scripts/startup_7b.sh                  7B, 2 ranks, one step
#   ZS_SHAPE=1.3b bash scripts/startup_7b.sh    24 layers, width 2048, 16 heads, FFN 5504
#   ZS_STARTUP_ONLY=1 ...                       stop at the "start-up:" line (no step)
# Environment: ZS_BUILD_DIR (default build), ZS_NP (ranks, default 2). Extra arguments go to
# zs_train. Needs about 6 GB per rank at 7B (int8 base).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ZS_BUILD_DIR:-build}/bin/zs_train
np=${ZS_NP:-2}
[ -x "$bin" ] || { echo "startup_7b: no $bin (build first)" >&2; exit 1; }
case ${ZS_SHAPE:-7b} in
  7b) shape=(--layers 32 --width 4096 --heads 32 --ffn 11008) ;;
  1.3b) shape=(--layers 24 --width 2048 --heads 16 --ffn 5504) ;;
  *) echo "startup_7b: ZS_SHAPE '${ZS_SHAPE}' is not one of 7b, 1.3b" >&2; exit 1 ;;
esac
args=(--family llama "${shape[@]}" --vocab 32000 --context 256 --batch 1 --lora-rank 8
      --base-dtype int8 --zero-stage 3 --checkpoint-activations --steps 1 --eval-batches 1
      --sample-tokens 0 "$@")
echo "startup_7b: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "startup_7b: mpirun -np $np $bin ${args[*]}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
t0=$(date +%s.%N)
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe --bind-to none -np "$np" "$bin" "${args[@]}" >"$out" 2>&1 &
pid=$!
first_step=""
while kill -0 "$pid" 2>/dev/null; do
  if [ -z "$first_step" ] && grep -qE '^step +1/' "$out"; then
    first_step=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  fi
  if [ "${ZS_STARTUP_ONLY:-0}" = 1 ] && grep -q '^start-up:' "$out"; then
    kill "$pid" 2>/dev/null || true
    break
  fi
  sleep 0.5
done
wait "$pid" 2>/dev/null || true
end=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -E '^(init|start-up|step +1/|zs_train: error)' "$out" || { cat "$out"; exit 1; }
[ -n "$first_step" ] && echo "startup_7b: first step line after ${first_step} s"
echo "startup_7b: ${end} s in all"
