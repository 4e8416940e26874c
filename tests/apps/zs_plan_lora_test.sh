#!/usr/bin/env bash
# zs_plan_lora_test.sh ZS_PLAN ZS_TRAIN CORPUS WORKDIR MPIEXEC [FLAGS...]: zs_plan's figures for
# LoRA fine-tunes, from its own flags, against what zs_train's trackers show for the same runs
# (the final record of --json-log: peak bytes per category, max over ranks), at 2 ranks: bf16
# compute with fp32 gradients, an int8 base (int8 GEMM where this CPU has it, and dequantized), an
# fp32 base, the compute-dtype base with two targets and offload, at stages 0-3. Parameters,
# gradients, master, optimizer, frozen base, communication buffers and host bytes must be equal
# to the byte. Activations: the plan leaves out oneDNN's own scratchpads (docs/memory.md; the
# unit tests measure them and match to the byte, tests/planner/plan_lora_test.cc), so here the
# tracked bytes must be at least the plan and the difference is printed.
set -euo pipefail
zs_plan=$1 zs_train=$2 corpus=$3 work=$4
shift 4
mpi=("$@")
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"
dims=(--layers 2 --heads 4 --width 64 --context 32)
configs=(
  "--zero-stage 3 --lora-rank 4 --base-dtype int8"
  "--zero-stage 0 --lora-rank 4 --base-dtype int8 --int8-compute dequantize"
  "--zero-stage 1 --lora-rank 4 --base-dtype fp32"
  "--zero-stage 2 --lora-rank 8 --lora-targets qkv,fc --offload"
)
n=0
for cfg in "${configs[@]}"; do
  # shellcheck disable=SC2206
  flags=($cfg)
  log=$work/run$n.jsonl
  "${mpi[@]}" -np 2 "$zs_train" "${dims[@]}" --batch 4 --dtype bf16 --grad-dtype fp32 \
    --eval-every 0 --sample-tokens 0 --threads 1 --steps 2 --warmup 1 --data "$corpus" \
    "${flags[@]}" --json-log "$log" >"$work/run$n.out" 2>&1 ||
    fail "zs_train $cfg: $(tail -5 "$work/run$n.out")"
  plan=$("$zs_plan" "${dims[@]}" --vocab 256 --batch 4 --threads 1 --ranks 2 --dtype bf16 --grad-dtype fp32 \
    "${flags[@]}" --json)
  plan_equals_tracked "$cfg" "$log" "$plan" params grads master optimizer frozen comm_buffers \
    host_offload
  n=$((n + 1))
done
echo "PASS"
