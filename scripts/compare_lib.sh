# shellcheck shell=bash
# Sourced by the comparison scripts (scripts/finetune_compare.sh, scripts/states_compare.sh,
# scripts/zeropp_compare.sh, scripts/scaling_experiment.sh, scripts/muon_quality.sh): the mpirun
# launcher, the pretrained base that their fine-tuning runs start from, and the check that a
# program has a switch.

# compare_mpirun NP: sets the array `mpi` to the mpirun command line of NP ranks on this node.
compare_mpirun() {
  mpi=(mpirun --oversubscribe --bind-to none -np "$1")
  if [ "$(id -u)" = 0 ]; then mpi+=(--allow-run-as-root); fi
}

# compare_run LOG CMD...: runs CMD under `mpi` with its output in LOG; on failure prints LOG's
# tail and exits 1; on success prints the last validation-loss and bytes-sent lines.
compare_run() {
  local log=$1
  shift
  "${mpi[@]}" "$@" > "$log" 2>&1 || { tail -20 "$log"; exit 1; }
  grep -E "val loss|bytes sent" "$log" | tail -2
}

# compare_pretrain BIN OUT STEPS FLAGS...: sets `base` to OUT/base.safetensors, pretrained first
# (STEPS steps on the shipped corpus, FLAGS added; log OUT/pretrain.txt) unless it exists: delete
# it to pretrain again.
compare_pretrain() {
  local bin=$1 out=$2 steps=$3
  shift 3
  base=$out/base.safetensors
  [ ! -f "$base" ] || return 0
  echo "== pretraining the base: $steps steps on the shipped corpus"
  compare_run "$out/pretrain.txt" "$bin" "$@" --steps "$steps" --warmup $((steps / 10)) \
    --eval-every 0 --export-safetensors "$base"
}
