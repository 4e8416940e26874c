#!/usr/bin/env bash
# Training quality of narrow optimizer states (issue 28, docs/memory.md "Training quality of narrow
# states (measured)"):
#   scripts/states_compare.sh [--build DIR] [--out DIR] [--steps N] [--pretrain-steps N]
#                             [--ft-steps N] [--np N] [--python PY] [--runs main|ft|both] [--quick]
#                             [-- extra zs_train flags]
# Once per AdamW state configuration (fp32, bf16, int8 with the float8 code book, int8 with the
# dynamic one), at N ranks, ZeRO-3, bf16 compute:
# 1. the README's main job (the default zs_train run, --steps 600 on the shipped corpus);
# 2. the full fine-tuning row of docs/finetune.md's comparison (scripts/finetune_compare.sh): the
#    base pretrained once (--pretrain-steps, fp32 states), then --ft-steps steps on
#    data/code_corpus.txt at --lr 3e-4, validated every ft-steps/6 steps (evaluation leaves the
#    training's bits alone: same param_hash with or without it);
# 3. scripts/states_report.py writes OUT/table.md (final validation losses, % vs fp32 states,
#    tracked optimizer bytes per rank, median step time) and OUT/states.png (loss curves).
# --runs main|ft: only one of 1 and 2 (the report names the other's runs "not run" unless their
# logs are in OUT: two invocations with different OUT may run at once, then
# `scripts/states_report.py OUT fp32 bf16 int8-float8 int8-dynamic` on the logs of both in one OUT).
# One run per configuration: validation losses are deterministic. --quick: a tiny model and 10
# steps everywhere (the ctest states_compare_smoke). Exit 77 when PY has no matplotlib (the table
# is written), 2 on bad arguments, 1 on a failed run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build out=$here/states-compare steps=600 pre_steps=300 ft_steps=300 np=2
python=/usr/bin/python3 ft_batches=8 runs=both
main_extra=() extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --pretrain-steps) pre_steps=$2; shift 2 ;;
    --ft-steps) ft_steps=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --quick)
      steps=10 pre_steps=10 ft_steps=10 ft_batches=1
      main_extra=(--warmup 2 --eval-every 5 --eval-batches 1)
      extra=(--layers 2 --heads 2 --width 64 --context 32 --batch 4)
      shift ;;
    --) shift; extra+=("$@"); break ;;
    *) echo "states_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=$build/bin/zs_train
[ -x "$bin" ] || { echo "states_compare.sh: no $bin (build first: scripts/run.sh build)" >&2; exit 2; }
source "$here/scripts/compare_lib.sh"
compare_mpirun "$np"
mkdir -p "$out"

names=(fp32 bf16 int8-float8 int8-dynamic)
declare -A states=(
  [fp32]="--optimizer-state-dtype fp32"
  [bf16]="--optimizer-state-dtype bf16"
  [int8-float8]="--optimizer-state-dtype int8 --optimizer-state-code float8"
  [int8-dynamic]="--optimizer-state-dtype int8 --optimizer-state-code dynamic"
)
# run_states KIND FLAGS...: one run per configuration, logs OUT/KIND-NAME.{txt,jsonl}.
run_states() {
  local kind=$1 n
  shift
  for n in "${names[@]}"; do
    echo "== $kind, $n states"
    rm -f "$out/$kind-$n.jsonl"
    # shellcheck disable=SC2086
    compare_run "$out/$kind-$n.txt" "$bin" "$@" ${states[$n]} --json-log "$out/$kind-$n.jsonl"
  done
}

case $runs in
  main | ft | both) ;;
  *) echo "states_compare.sh: --runs must be main, ft or both, not '$runs'" >&2; exit 2 ;;
esac
if [ "$runs" != ft ]; then
  run_states main --zero-stage 3 --dtype bf16 --steps "$steps" "${main_extra[@]}" "${extra[@]}"
fi
if [ "$runs" != main ]; then
  common=(--dtype bf16 --zero-stage 3 --sample-tokens 0 --eval-batches "$ft_batches" "${extra[@]}")
  compare_pretrain "$bin" "$out" "$pre_steps" "${common[@]}"
  run_states ft "${common[@]}" --data "$here/data/code_corpus.txt" --init-safetensors "$base" \
    --lr 3e-4 --steps "$ft_steps" --warmup $((ft_steps / 10)) --eval-every $((ft_steps / 6))
fi

"$python" "$here/scripts/states_report.py" "$out" "${names[@]}"
