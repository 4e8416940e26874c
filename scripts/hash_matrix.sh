#!/usr/bin/env bash
# Prints zs_train's param_hash for the stage x dtype x gradient dtype x offload x prefetch x
# micro-batch matrix (and SGD, and a save/resume pair), one line per configuration, so that a
# change meant to keep behaviour to the bit can be checked by diffing two runs:
#   scripts/hash_matrix.sh build/bin/zs_train [NP] > before.txt
set -uo pipefail
bin=${1:?usage: hash_matrix.sh ZS_TRAIN [NP]}
np=${2:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
tiny=(--layers 2 --heads 2 --width 64 --context 32 --batch 2 --steps 4 --warmup 2 --eval-every 0
      --eval-batches 1 --sample-tokens 0 --threads 1)
run() {
  local label=$1
  shift
  if mpirun --oversubscribe --bind-to none "${root[@]}" -np "$np" -x OMP_NUM_THREADS=1 "$bin" \
      "${tiny[@]}" "$@" > "$work/out" 2>&1; then
    echo "$label $(grep -oE 'param_hash: [0-9a-f]+' "$work/out" | awk '{print $2}')"
  else
    echo "$label FAILED"
    tail -3 "$work/out" >&2
  fi
}
for dtype in fp32 bf16 fp16; do
  grads="fp32 $dtype"
  [ "$dtype" = fp32 ] && grads=fp32
  for grad in $grads; do
    for stage in 0 1 2 3; do
      for off in 0 1; do
        [ "$off" = 1 ] && [ "$stage" = 0 ] && continue
        for mb in 1 2; do
          pf_list="1"
          [ "$stage" = 3 ] && pf_list="0 1 2"
          for pf in $pf_list; do
            flags=(--dtype "$dtype" --grad-dtype "$grad" --zero-stage "$stage" --gradient-accumulation-steps "$mb")
            # --prefetch applies to stage 3 (refused below it: apps/common/engine_options.h).
            [ "$stage" = 3 ] && flags+=(--prefetch "$pf")
            [ "$off" = 1 ] && flags+=(--offload-optimizer)
            run "np$np dtype=$dtype grad=$grad stage=$stage offload=$off mb=$mb prefetch=$pf" "${flags[@]}"
          done
        done
      done
    done
  done
done
for stage in 0 3; do
  run "np$np sgd stage=$stage" --optimizer sgd --zero-stage "$stage" --dtype bf16
done
# Resume: save at steps 2 and 4, drop step 4's checkpoint, resume from step 2 to 4 (the hash
# must equal the uninterrupted run's).
for stage in 1 3; do
  for off in 0 1; do
    flags=(--zero-stage "$stage" --save-dir "$work/ck" --keep 0)
    [ "$off" = 1 ] && flags+=(--offload-optimizer)
    rm -rf "$work/ck"
    run "np$np full stage=$stage offload=$off" "${flags[@]}" --save-every 2
    rm -rf "$work/ck/step-00000004"
    [ -d "$work/ck/step-00000002" ] || echo "np$np resume stage=$stage offload=$off NO-CHECKPOINT"
    run "np$np resume stage=$stage offload=$off" "${flags[@]}" --resume
  done
done
