#!/usr/bin/env bash
# bench_states_step: the training step with the optimizer offloaded at 2 ranks (ZeRO-3), with
# AdamW's moments in fp32, bf16, int8 (float8 codes) and int8 (dynamic codes), side by side
# (issue 28: "the training step with offload at 2 ranks: step time with int8 vs fp32 states").
#
#   bash bench/bench_states_step.sh [--steps N] [--rounds R] [--np N] [-- extra zs_train flags]
#
# Model: a wide, shallow GPT with a short batch, so that the optimizer is a visible share of the
# step (4 layers, width 768, 12 heads, context 16, 1 sequence per rank: 28.8M parameters, 14.4M
# updated per rank). bf16 compute, fp32 gradients, --offload-optimizer (master and moments in the
# host arena; the fused state kernels are the offloaded update), 1 thread per rank.
# The configurations run R rounds, interleaved (c1 c2 c3 c4 c1 ...), so that a slow spell of a
# shared machine does not land on one of them. Per configuration: the median over rounds of each
# run's median step time (steps after the first), its min-max over rounds, the host-offloaded
# bytes per rank (tracked: master + moments) and the step time relative to fp32 states.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=30 rounds=3 np=2
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench_states_step: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=${ZS_BUILD_DIR:-build}/bin/zs_train
[ -x "$bin" ] || { echo "bench_states_step: $bin not built" >&2; exit 1; }
shape=(--layers 4 --width 768 --heads 12 --context 16 --batch 1 --dtype bf16 --grad-dtype fp32)
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base=$tmp
names=(fp32 bf16 int8-float8 int8-dynamic)
declare -A cfg=(
  [fp32]="--optimizer-state-dtype fp32"
  [bf16]="--optimizer-state-dtype bf16"
  [int8-float8]="--optimizer-state-dtype int8 --optimizer-state-code float8"
  [int8-dynamic]="--optimizer-state-dtype int8 --optimizer-state-code dynamic")

for r in $(seq "$rounds"); do
  for name in "${names[@]}"; do
    # shellcheck disable=SC2086 # the configuration's flags split on purpose
    mpirun "${flags[@]}" -np "$np" "$bin" "${shape[@]}" --zero-stage 3 --offload-optimizer \
      ${cfg[$name]} --steps "$steps" --eval-every 0 --sample-tokens 0 --log-every 1000 \
      --json-log "$tmp/$name.$r.jsonl" "${extra[@]}" > "$tmp/out" 2>&1 ||
      { cat "$tmp/out"; exit 1; }
  done
done

python3 - "$tmp" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
tmp, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for name in names:
    finals = []
    for r in range(1, rounds + 1):
        with open(os.path.join(tmp, f"{name}.{r}.jsonl")) as f:
            finals.append([json.loads(l) for l in f if '"final"' in l][-1])
    ms = [x["median_step_ms"] for x in finals]
    rows[name] = (statistics.median(ms), min(ms), max(ms), finals[0]["memory_bytes"]["host_offload"],
                  finals[0]["param_hash"], finals[0]["params"])
print(f"zs_train ZeRO-3 --offload-optimizer, {rows[names[0]][5]:,} parameters; {os.cpu_count()} CPUs: "
      + open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(" :\t"))
print(f"{'states':<14} {'step ms (median of rounds)':>27} {'min-max':>15} {'host offload MiB/rank':>22} {'vs fp32':>8}")
base = rows[names[0]][0]
for name in names:
    med, lo, hi, host, _, _ = rows[name]
    print(f"{name:<14} {med:>27.1f} {lo:>7.1f}-{hi:<7.1f} {host / 2**20:>22.2f} {med / base:>7.2f}x")
PY
