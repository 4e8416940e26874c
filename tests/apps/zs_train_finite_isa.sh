#!/usr/bin/env bash
# zs_train under a finite but absurd optimizer state, ISA caps that differ between ranks, and a
# long evaluation (issue 40, items 5 and 8), one case per ctest:
#   zs_train_finite_isa.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# ZS_CKPT_POKE names the test tool that edits and re-signs a checkpoint (ckpt_poke.cc).
# Cases:
#   absurd_state  a 3-step checkpoint whose exp_avg (SGD: momentum) of block.1 fc.weight is set to
#                 3e38 and re-signed loads, and the first update overflows: every rank exits 1,
#                 one message names step 4, the unit and the parameter, no checkpoint or export is
#                 written after it, no hang; AdamW (fp32 compute, bf16 compute, offloaded, bf16
#                 and int8 states, int8 offloaded) and SGD
#   isa_mix       2 ranks with different ZS_MAX_ISA (avx2 and avx512; scalar by ZS_FORCE_SCALAR=1
#                 and avx512) train to the param_hash of a uniform run (bf16 resident; int8 states
#                 offloaded at stage 2); an int8 base with --int8-compute auto that the caps resolve
#                 apart (scalar: dequantize, avx512: the int8 GEMM, where the CPU has VNNI) is
#                 refused naming both; pinned with dequantize it trains to the uniform bits
#   eval_many     --eval-batches 50000 holds its tokens a chunk at a time: the peak RSS is within
#                 8 MiB of a 1-batch evaluation's (one buffer of the set took 26 MB more)
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
unset ZS_MAX_ISA ZS_FORCE_SCALAR ONEDNN_MAX_CPU_ISA
poke=${ZS_CKPT_POKE:?ZS_CKPT_POKE must name the ckpt_poke tool}

# ranks_exit out np args...: zs_train at np ranks under a wrapper that prints each rank's exit
# status ("rank R exit N") and exits 0, so that mpirun ends no rank early; no hang in 120 s.
ranks_exit() {
  local out=$1 np=$2
  shift 2
  timeout 120 "${mpi[@]}" -np "$np" sh -c \
    '"$0" "$@"; echo "rank ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-?}} exit $?"' "$bin" "$@" > "$out" 2>&1
  [ $? -ne 124 ] || { cat "$out"; fail "$out: hung (120 s)"; }
}

case "$case_name" in
  absurd_state)
    paths=("adamw fp32|--dtype fp32" "adamw bf16|" "adamw offloaded|--offload-optimizer"
           "bf16 states|--optimizer-state-dtype bf16" "int8 states|--optimizer-state-dtype int8"
           "int8 states offloaded|--optimizer-state-dtype int8 --offload-optimizer"
           "sgd|--optimizer sgd --lr 10")  # SGD's step is lr x momentum: lr 10 overflows 3e38
    for p in "${paths[@]}"; do
      label=${p%%|*}
      read -r -a flags <<< "${p#*|}"
      d="$work/${label// /_}"
      mkdir -p "$d"
      run_ok "$d/save.txt" 2 "${tiny[@]}" "${flags[@]}" --steps 3 --save-dir "$d/ck" --save-every 3
      "$poke" "$d/ck/step-00000003" block.1 fc.weight exp_avg 3e38 > "$d/poke.txt" ||
        { cat "$d/poke.txt"; fail "$label: ckpt_poke"; }
      ranks_exit "$d/res.txt" 2 "${tiny[@]}" "${flags[@]}" --steps 6 \
        --resume-from "$d/ck/step-00000003" --save-dir "$d/after" --save-every 1 \
        --export-safetensors "$d/model.safetensors"
      grep -qF "resumed from $d/ck/step-00000003" "$d/res.txt" || { cat "$d/res.txt"; fail "$label: not resumed"; }
      for r in 0 1; do
        grep -qx "rank $r exit 1" "$d/res.txt" || { cat "$d/res.txt"; fail "$label: rank $r did not exit 1"; }
      done
      msg="zs_train: error: step 4: the update made parameter 'fc.weight' of unit 'block.1' not finite"
      grep -qF "$msg" "$d/res.txt" || { cat "$d/res.txt"; fail "$label: no '$msg'"; }
      [ "$(grep -c 'zs_train: error' "$d/res.txt")" -eq 1 ] || { cat "$d/res.txt"; fail "$label: not one message"; }
      ! grep -qE '^step +4/' "$d/res.txt" || fail "$label: step 4 was reported"
      [ -z "$(ls "$d/after" 2> /dev/null | grep step-)" ] || fail "$label: a checkpoint was written after the stop"
      [ ! -e "$d/model.safetensors" ] || fail "$label: the non-finite model was exported"
      echo "$label: $(grep 'zs_train: error' "$d/res.txt")"
    done
    ;;
  isa_mix)
    # mixed out "env-of-rank-0" "env-of-rank-1" args...: rank 0 and rank 1 under their own caps.
    mixed() {
      local out=$1 e0=$2 e1=$3
      shift 3
      timeout 120 "${mpi[@]}" -np 1 env $e0 "$bin" "$@" : -np 1 env $e1 "$bin" "$@" > "$out" 2>&1
    }
    states=(--optimizer-state-dtype int8 --offload-optimizer --zero-stage 2)
    for cfg in "bf16 resident|" "int8 states offloaded|${states[*]}"; do
      label=${cfg%%|*}
      read -r -a flags <<< "${cfg#*|}"
      u="$work/u-${label// /_}.txt"
      run_ok "$u" 2 "${tiny[@]}" "${flags[@]}" --steps 4
      for pair in "ZS_MAX_ISA=avx2|ZS_MAX_ISA=avx512" "ZS_FORCE_SCALAR=1|ZS_MAX_ISA=avx512" \
        "ZS_MAX_ISA=avx512|ZS_MAX_ISA=scalar"; do
        m="$work/m.txt"
        mixed "$m" "${pair%%|*}" "${pair#*|}" "${tiny[@]}" "${flags[@]}" --steps 4 ||
          { cat "$m"; fail "$label: ${pair/|/ and } refused or failed"; }
        same_hash "$label: uniform vs ${pair/|/ on rank 0, } on rank 1" "$u" "$m"
      done
    done
    # Rank 0's own cap is the one its log reports.
    mixed "$work/c.txt" ZS_MAX_ISA=avx2 ZS_MAX_ISA=avx512 "${tiny[@]}" --steps 2 ||
      { cat "$work/c.txt"; fail "avx2 and avx512: failed"; }
    grep -q "our kernels at avx2 (ZS_MAX_ISA avx2)" "$work/c.txt" || { cat "$work/c.txt"; fail "rank 0's cap not reported"; }
    # An int8 base with auto: the scalar cap takes dequantization, avx512 the int8 GEMM where the
    # CPU has VNNI; those ranks would compute different products and are refused.
    lora=(--lora-rank 4 --base-dtype int8 --steps 2)
    run_ok "$work/lu.txt" 2 "${tiny[@]}" "${lora[@]}" --int8-compute dequantize
    if grep -q "int8 gemm: onednn" "$work/lu.txt"; then
      mixed "$work/la.txt" ZS_MAX_ISA=scalar ZS_MAX_ISA=avx512 "${tiny[@]}" "${lora[@]}" &&
        { cat "$work/la.txt"; fail "auto int8 resolved apart: accepted"; }
      text="zs_train: error: engine: ranks disagree on frozen.int8_compute: auto: dequantize on rank 0, auto: int8-gemm on rank 1"
      grep -qF "$text" "$work/la.txt" || { cat "$work/la.txt"; fail "no '$text'"; }
      echo "auto int8 resolved apart: $(grep 'zs_train: error' "$work/la.txt")"
    else
      echo "no int8 GEMM on this CPU: the auto refusal is not exercised"
    fi
    mixed "$work/ld.txt" ZS_MAX_ISA=scalar ZS_MAX_ISA=avx512 "${tiny[@]}" "${lora[@]}" \
      --int8-compute dequantize || { cat "$work/ld.txt"; fail "dequantize on mixed caps failed"; }
    same_hash "int8 base, dequantize: uniform vs scalar and avx512" "$work/lu.txt" "$work/ld.txt"
    ;;
  eval_many)
    # Peak RSS (KiB) of zs_train at 1 rank with --eval-batches N: the largest of the processes.
    peak_kib() {
      local n=$1 out="$work/eval-$1.txt"
      python3 - "$out" "${mpi[@]}" -np 1 "$bin" --layers 1 --heads 1 --width 16 --context 32 \
        --batch 4 --threads 1 --steps 1 --eval-batches "$n" --sample-tokens 0 << 'EOF'
import resource, subprocess, sys
with open(sys.argv[1], "w") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT, timeout=240).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else "exit %d" % rc)
EOF
    }
    one=$(peak_kib 1) many=$(peak_kib 50000)
    echo "peak RSS: --eval-batches 1 $one KiB, --eval-batches 50000 $many KiB"
    [[ "$one" =~ ^[0-9]+$ ]] || { cat "$work/eval-1.txt"; fail "--eval-batches 1: $one"; }
    [[ "$many" =~ ^[0-9]+$ ]] || { cat "$work/eval-50000.txt"; fail "--eval-batches 50000: $many"; }
    grep -q "val loss" "$work/eval-50000.txt" || fail "no validation loss"
    # 50,000 x 4 x 33 tokens of 4 bytes are 25.2 MiB in one buffer; a chunk is at most 4 MiB.
    [ $((many - one)) -le 8192 ] || fail "the evaluation's peak RSS grew by $((many - one)) KiB (> 8 MiB)"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
