#!/usr/bin/env bash
# The effect of ZeRO++ on training (issue 29, docs/engine.md "ZeRO++: effect on training"):
#   scripts/zeropp_compare.sh [--build DIR] [--out DIR] [--steps N] [--np N] [--nodes K]
#                             [--configs "zero3 qwz hpz qgz zpp"] [--python PY] [--quick]
#                             [-- extra zs_train flags]
# The README's default zs_train run (ZeRO-3, bf16, its model, data and seed) at --np ranks (default
# 4) split into --nodes simulated nodes (default 2, ZS_FAKE_NODES: block placement on this one
# machine, so hpZ and qgZ have nodes to work across), the same steps and seed once per
# configuration:
#   zero3  plain ZeRO-3 (the reference)         qwz  + --zero-quantized-weights
#   hpz    + --zero-hpz-partition-size np/nodes  qgz  + --zero-quantized-gradients
#   zpp    all three
# Logs: OUT/NAME.{txt,jsonl}; an existing OUT/NAME.jsonl with a final record is kept (delete it to
# run again), so runs may be made in several invocations. Then scripts/zeropp_report.py writes
# OUT/table.md (final validation loss and its difference from zero3, bytes per step within and
# between nodes, median step) and OUT/zeropp_loss.png. Validation every steps/8 steps
# (evaluation leaves the training's bits alone). --quick: a tiny model and 10 steps (a smoke run).
# Exit 77 when PY has no matplotlib (the table is written), 2 on bad arguments, 1 on a failed run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build out=$here/zeropp-compare steps=200 np=4 nodes=2
python=/usr/bin/python3 configs="zero3 qwz hpz qgz zpp" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --quick)
      steps=10
      extra=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --eval-batches 1)
      shift ;;
    --) shift; extra+=("$@"); break ;;
    *) echo "zeropp_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=$build/bin/zs_train
[ -x "$bin" ] || { echo "zeropp_compare.sh: no $bin (build first: scripts/run.sh build)" >&2; exit 2; }
[ "$nodes" -ge 1 ] && [ $((np % nodes)) = 0 ] ||
  { echo "zeropp_compare.sh: --np $np is not a multiple of --nodes $nodes" >&2; exit 2; }
source "$here/scripts/compare_lib.sh"
compare_mpirun "$np"
export ZS_FAKE_NODES=$nodes
mpi+=(-x ZS_FAKE_NODES -x OMP_NUM_THREADS=1)
mkdir -p "$out"

hpz="--zero-hpz-partition-size $((np / nodes))"
declare -A flags=(
  [zero3]=""
  [qwz]="--zero-quantized-weights"
  [hpz]="$hpz"
  [qgz]="--zero-quantized-gradients"
  [zpp]="--zero-quantized-weights $hpz --zero-quantized-gradients"
)
names=()
for n in $configs; do
  [ -n "${flags[$n]+set}" ] ||
    { echo "zeropp_compare.sh: unknown configuration '$n' (zero3 qwz hpz qgz zpp)" >&2; exit 2; }
  names+=("$n")
  if grep -q '"final"' "$out/$n.jsonl" 2>/dev/null; then
    echo "== $n: kept $out/$n.jsonl (delete it to run again)"
    continue
  fi
  echo "== $n: $np ranks, $nodes node(s), $steps steps ${flags[$n]}"
  rm -f "$out/$n.jsonl"
  # shellcheck disable=SC2086
  compare_run "$out/$n.txt" "$bin" --zero-stage 3 --dtype bf16 --steps "$steps" \
    --eval-every $(((steps + 7) / 8)) --sample-tokens 0 "${extra[@]}" ${flags[$n]} \
    --json-log "$out/$n.jsonl"
done

"$python" "$here/scripts/zeropp_report.py" "$out" "${names[@]}"
