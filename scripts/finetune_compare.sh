#!/usr/bin/env bash
# The side-by-side fine-tuning comparison of docs/finetune.md (issue 16):
#   scripts/finetune_compare.sh [--build DIR] [--out DIR] [--pretrain-steps N] [--steps N]
#                               [--repeats R] [--np N] [-- extra zs_train flags]
# 1. pretrains a base with zs_train on the shipped corpus (data/) and exports it;
# 2. fine-tunes it on data/code_corpus.txt (C++ source: another kind of text) at N ranks, ZeRO-3,
#    bf16 compute, in each configuration: full fine-tuning, LoRA on a bf16 base, LoRA on an int8
#    base (and, where this build has the flag, LoRA on an int8 base computed with the int8 GEMM);
#    the configurations run R times, interleaved (c1 c2 c3 c1 c2 c3 ...), so that a slow spell
#    of a shared machine does not land on one of them;
# 3. writes OUT/table.md: validation loss on the code text, peak tracked memory per rank,
#    model-state bytes per rank, bytes sent per rank per step, median step time (median and
#    spread over the repeats). Validation losses are deterministic (same bits every repeat).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build out=$here/finetune-compare pre_steps=300 steps=150 repeats=3 np=2
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --pretrain-steps) pre_steps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "finetune_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=$build/bin/zs_train
[ -x "$bin" ] || { echo "finetune_compare.sh: no $bin (build first: scripts/run.sh build)" >&2; exit 2; }
source "$here/scripts/compare_lib.sh"
compare_mpirun "$np"
mkdir -p "$out"
common=(--dtype bf16 --zero-stage 3 --sample-tokens 0 --eval-batches 8 "${extra[@]}")
compare_pretrain "$bin" "$out" "$pre_steps" "${common[@]}"

ft=(--data "$here/data/code_corpus.txt" --init-safetensors "$base" --eval-every 0)
run_len=(--steps "$steps" --warmup $((steps / 10)))
lora=(--lora-rank 8 --lora-alpha 16 --lr 2e-3)
names=(full lora-bf16 lora-int8)
declare -A flags=(
  [full]="--lr 3e-4"
  [lora-bf16]="${lora[*]} --base-dtype bf16"
  [lora-int8]="${lora[*]} --base-dtype int8"
)
if "$bin" --help 2>/dev/null | grep -q -- "--int8-compute"; then
  # The default (auto) is the int8 GEMM where it runs: name the dequantize path for the third.
  flags[lora-int8]+=" --int8-compute dequantize"
  names+=(lora-int8-gemm)
  flags[lora-int8-gemm]="${lora[*]} --base-dtype int8 --int8-compute int8-gemm"
  # Only where the int8 GEMM runs (VNNI); elsewhere zs_train refuses the flag.
  if ! "${mpi[@]}" "$bin" "${common[@]}" "${ft[@]}" ${flags[lora-int8-gemm]} --steps 1 --warmup 0 \
       > "$out/probe.txt" 2>&1; then
    echo "(no int8 GEMM on this machine: $(grep -m1 'error' "$out/probe.txt"))"
    unset 'names[3]'
  fi
fi

for r in $(seq 1 "$repeats"); do
  for n in "${names[@]}"; do
    echo "== $n, repeat $r"
    rm -f "$out/$n-$r.jsonl"
    # shellcheck disable=SC2086
    compare_run "$out/$n-$r.txt" "$bin" "${common[@]}" "${ft[@]}" "${run_len[@]}" ${flags[$n]} \
      --json-log "$out/$n-$r.jsonl"
  done
done

python3 - "$out" "$repeats" "${names[@]}" <<'EOF'
import json, statistics, sys
out, repeats, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def final(path):
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if j.get("final"):
                return j
    raise SystemExit(f"{path}: no final record")
def mib(b): return f"{b / 2**20:.2f}"
rows = []
for n in names:
    runs = [final(f"{out}/{n}-{r}.jsonl") for r in range(1, repeats + 1)]
    vals = {r["val_loss"] for r in runs}
    m = runs[0]["memory_bytes"]
    states = sum(m.get(k, 0) for k in ("params", "grads", "master", "optimizer", "frozen"))
    ms = [r["median_step_ms"] for r in runs]
    rows.append((n, runs[0]["params"], runs[0]["val_loss"], len(vals) == 1, m["total"], states,
                 m.get("frozen", 0), runs[0]["comm_bytes_per_step"], statistics.median(ms),
                 min(ms), max(ms)))
lines = ["| configuration | trainable params | val loss (code) | peak tracked / rank (MiB) | "
         "model states / rank (MiB) | of which frozen base (MiB) | sent / rank / step (MiB) | "
         "step ms: median of repeats (min-max) |", "|---|---|---|---|---|---|---|---|"]
for (n, p, v, same, peak, st, fr, comm, med, lo, hi) in rows:
    lines.append(f"| {n} | {p:,} | {v:.4f}{'' if same else ' (varied!)'} | {mib(peak)} | "
                 f"{mib(st)} | {mib(fr)} | {mib(comm)} | {med:.1f} ({lo:.1f}-{hi:.1f}) |")
table = "\n".join(lines)
open(f"{out}/table.md", "w").write(table + "\n")
print(table)
EOF
