#!/usr/bin/env bash
# zs_train --world-invariant (issue 30, [Note: world-invariant reduction]), one case per ctest:
#   zs_train_invariant.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# The step is 8 global micro-batches of 2 sequences (--global-micro-batches 8 --batch 2); every
# case compares param_hash (and the last training and validation loss) across world sizes.
#   stages   bf16, stages 0-3, at 1, 2 and 4 ranks (stage 3 also at 8), 20 steps: one hash
#   dtypes   fp32 and fp16 (dynamic loss scaling) stage 2, offloaded bf16 stage 3, int8 optimizer
#            states, hierarchical collectives on 2 fake nodes: one hash per setting at 1, 2, 4
#   lora     LoRA on an int8 base at 1, 2, 4 ranks; with --optimizer muon (Muon on every adapter
#            matrix) one hash at 1, 2, 4 ranks and stages 0 and 3, and resumed at 2 ranks from 4
#   qwen3    --family qwen3 (q/k norms), 2 heads of 48 on a width of 64 over 1 KV head, tied:
#            bf16 stage 3 and fp32 stage 1 at 1, 2, 4 ranks
#   headchunk the LM head in row chunks ([Note: chunked head] in nn/lm_head.h): --head-chunk 5
#            (64 rows per micro-batch: 13 chunks, the last of 4) one hash at 1, 2, 4 ranks; the
#            tiny model at 2 ranks with --head-chunk 7 (128 rows) one hash at stages 0-3 and with
#            --checkpoint-activations, and step 1's loss that of --head-chunk off; a bad value
#            refused by name
#   attention --attention fused (nn/flash_attention.h) on a Llama form with grouped heads (4 over
#            2) and a context of 72 (two query tiles, the second partial): fp32 one hash at
#            stages 0 and 3 and at 1 and 2 ranks, bf16 stage 3 at 1 and 2 ranks; step 1's loss
#            within 1e-4 of --attention gemm's; a bad value refused by name
#   resume   saved at step 10 by 4 ranks, resumed at 2 and at 8 (and 1): the uninterrupted
#            4-rank run's hash
#   plan     zs_plan --world-invariant equals the trainer's tracked memory (the tree's partial
#            sums under grads) and its bytes per step (stage 1: a reduce-scatter per micro-batch;
#            Muon at stage 3: its u all-gather and its owners' reduce-scatter)
#   refused  3 ranks, a global micro-batch count the ranks do not divide, a conflicting
#            --gradient-accumulation-steps, bf16 gradients, no --global-micro-batches at all (the
#            mode would depend on the world size), a resume with another M: one message each,
#            no step
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

base=(--layers 2 --heads 2 --width 64 --context 32 --batch 2 --warmup 2 --eval-every 5
      --eval-batches 4 --sample-tokens 8 --world-invariant --threads 1)
inv=("${base[@]}" --global-micro-batches 8)
last_line() { grep -E '^step +[0-9]+/' "$1" | tail -1 | grep -oE 'loss [0-9.]+|val loss [0-9.]+' | tr '\n' ' '; }

# same_at LABEL SIZES FLAGS...: runs at every size in SIZES; one param_hash and last step line.
same_at() {
  local label=$1 sizes=$2 n first="" line=""
  shift 2
  for n in $sizes; do
    run_ok "$work/r$n.txt" "$n" "${inv[@]}" "$@"
    if [ -z "$first" ]; then
      first=$n
      line=$(last_line "$work/r$n.txt")
      continue
    fi
    same_hash "$label: $n ranks vs $first" "$work/r$first.txt" "$work/r$n.txt"
    [ "$(last_line "$work/r$n.txt")" = "$line" ] ||
      fail "$label: last step at $n ranks '$(last_line "$work/r$n.txt")' vs '$line'"
  done
  echo "$label: one hash and last step ($line) at ranks $sizes"
}

case "$case_name" in
  qwen3)
    qwen=(--family qwen3 --kv-heads 1 --head-dim 48 --tie-embeddings on)
    same_at "qwen3 bf16 stage 3" "1 2 4" --steps 10 --dtype bf16 --zero-stage 3 "${qwen[@]}"
    same_at "qwen3 fp32 stage 1" "1 2 4" --steps 10 --dtype fp32 --zero-stage 1 "${qwen[@]}"
    ;;
  stages)
    for stage in 0 1 2; do same_at "bf16 stage $stage" "1 2 4" --steps 20 --dtype bf16 --zero-stage $stage; done
    same_at "bf16 stage 3" "1 2 4 8" --steps 20 --dtype bf16 --zero-stage 3
    cp "$work/r1.txt" "$work/s3.txt"
    run_ok "$work/s0.txt" 2 "${inv[@]}" --steps 20 --dtype bf16 --zero-stage 0
    same_hash "stage 0 vs stage 3" "$work/s0.txt" "$work/s3.txt"
    ;;
  dtypes)
    same_at "fp32 stage 2" "1 2 4" --steps 20 --dtype fp32 --zero-stage 2
    same_at "fp16 stage 2" "1 2 4" --steps 20 --dtype fp16 --zero-stage 2
    same_at "bf16 stage 3 offloaded" "1 2 4" --steps 20 --dtype bf16 --offload-optimizer
    same_at "bf16 int8 states" "1 2 4" --steps 20 --dtype bf16 --optimizer-state-dtype int8
    export ZS_FAKE_NODES=2
    same_at "hierarchical, 2 fake nodes" "2 4" --steps 20 --dtype bf16 --collectives hierarchical
    unset ZS_FAKE_NODES
    run_ok "$work/flat.txt" 4 "${inv[@]}" --steps 20 --dtype bf16 --collectives flat
    same_hash "hierarchical vs flat at 4 ranks" "$work/r4.txt" "$work/flat.txt"
    ;;
  lora)
    same_at "LoRA on an int8 base" "1 2 4" --steps 20 --dtype bf16 --lora-rank 4 --base-dtype int8 \
      --int8-compute dequantize
    # Muon on the adapters' matrices (every LoRA A and B of the blocks; nothing else trains).
    lora_muon=(--steps 12 --dtype bf16 --lora-rank 4 --base-dtype int8 --int8-compute dequantize
               --optimizer muon)
    same_at "LoRA on an int8 base, Muon" "1 2 4" "${lora_muon[@]}"
    grep -q "^optimizer: muon: .*here 16 matrices, 8192 params by Muon, 0 by AdamW" "$work/r2.txt" ||
      { grep "^optimizer" "$work/r2.txt"; fail "LoRA with Muon: the banner's rule line"; }
    same_hash "LoRA on an int8 base, Muon: 2 ranks vs 1" "$work/r1.txt" "$work/r2.txt"
    for stage in 0 3; do
      run_ok "$work/m$stage.txt" 2 "${inv[@]}" "${lora_muon[@]}" --zero-stage $stage
    done
    same_hash "LoRA on an int8 base, Muon: stage 0 vs 3" "$work/m0.txt" "$work/m3.txt"
    # Resumed at step 6 from a checkpoint of 4 ranks, at 2: the uninterrupted hash.
    run_ok "$work/ma.txt" 4 "${inv[@]}" "${lora_muon[@]}" --save-dir "$work/mck" --save-every 6
    run_ok "$work/mb.txt" 2 "${inv[@]}" "${lora_muon[@]}" --resume-from "$work/mck/step-00000006"
    grep -q "^resumed from $work/mck/step-00000006 " "$work/mb.txt" || fail "LoRA with Muon: not resumed"
    same_hash "LoRA on an int8 base, Muon: resumed at 2 ranks vs uninterrupted at 1" \
      "$work/r1.txt" "$work/mb.txt"
    ;;
  headchunk)
    same_at "bf16 stage 3, --head-chunk 5" "1 2 4" --steps 10 --dtype bf16 --head-chunk 5
    for stage in 0 1 2 3; do
      run_ok "$work/st$stage.txt" 2 "${tiny[@]}" --steps 6 --zero-stage $stage --head-chunk 7
    done
    for stage in 1 2 3; do
      same_hash "--head-chunk 7: stage 0 vs $stage" "$work/st0.txt" "$work/st$stage.txt"
    done
    run_ok "$work/ck.txt" 2 "${tiny[@]}" --steps 6 --zero-stage 3 --head-chunk 7 \
      --checkpoint-activations
    same_hash "--head-chunk 7: checkpointed vs not" "$work/st3.txt" "$work/ck.txt"
    run_ok "$work/off.txt" 2 "${tiny[@]}" --steps 6 --zero-stage 3 --head-chunk off
    first() { grep -E '^step +1/' "$1" | grep -oE 'loss [0-9.]+' | head -1; }
    [ -n "$(first "$work/off.txt")" ] && [ "$(first "$work/off.txt")" = "$(first "$work/st3.txt")" ] ||
      fail "step 1: '$(first "$work/st3.txt")' chunked vs '$(first "$work/off.txt")' whole"
    echo "step 1: $(first "$work/st3.txt") chunked and whole"
    for bad in abc 0 -3 7x; do
      expect "--head-chunk $bad" "--head-chunk '$bad' is not auto, off or a number of token rows >= 1" \
        "${tiny[@]}" --steps 2 --head-chunk "$bad"
    done
    help_has "--head-chunk arg (=auto)"
    ;;
  attention)
    att=(--family llama --layers 2 --heads 4 --kv-heads 2 --width 64 --context 72 --batch 2
         --warmup 2 --eval-every 5 --eval-batches 2 --sample-tokens 8 --world-invariant --threads 1
         --global-micro-batches 4 --steps 6)
    for stage in 0 3; do
      for n in 1 2; do
        run_ok "$work/f$stage.$n.txt" $n "${att[@]}" --dtype fp32 --zero-stage $stage --attention fused
      done
    done
    same_hash "fused fp32: stage 0 at 1 vs 2 ranks" "$work/f0.1.txt" "$work/f0.2.txt"
    same_hash "fused fp32: stage 0 vs 3 at 1 rank" "$work/f0.1.txt" "$work/f3.1.txt"
    same_hash "fused fp32: stage 0 vs 3 at 2 ranks" "$work/f0.2.txt" "$work/f3.2.txt"
    for n in 1 2; do
      run_ok "$work/b$n.txt" $n "${att[@]}" --dtype bf16 --zero-stage 3 --attention fused
    done
    same_hash "fused bf16 stage 3: 1 vs 2 ranks" "$work/b1.txt" "$work/b2.txt"
    run_ok "$work/g.txt" 2 "${att[@]}" --dtype fp32 --zero-stage 3 --attention gemm
    first() { grep -E '^step +1/' "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }
    lf=$(first "$work/f3.2.txt") lg=$(first "$work/g.txt")
    awk -v a="$lf" -v b="$lg" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }' ||
      fail "step 1: loss '$lf' fused vs '$lg' gemm"
    echo "step 1: loss $lf fused, $lg gemm"
    expect "--attention flash" "--attention 'flash' is not fused or gemm" "${tiny[@]}" --steps 2 \
      --attention flash
    help_has "--attention arg (=gemm)"
    ;;
  resume)
    run_ok "$work/straight.txt" 4 "${inv[@]}" --steps 20 --dtype bf16
    run_ok "$work/save.txt" 4 "${inv[@]}" --steps 20 --dtype bf16 --save-dir "$work/ckpt" \
      --save-every 10
    same_hash "saving run vs uninterrupted" "$work/straight.txt" "$work/save.txt"
    grep -qF "world-invariant: 8 micro-batches per step over all ranks (2 per rank here)" \
      "$work/straight.txt" || { cat "$work/straight.txt"; fail "the banner does not state the mode and M"; }
    for n in 2 8 1; do
      run_ok "$work/res$n.txt" "$n" "${inv[@]}" --steps 20 --dtype bf16 \
        --resume-from "$work/ckpt/step-00000010"
      grep -qF "resumed from $work/ckpt/step-00000010" "$work/res$n.txt" ||
        { cat "$work/res$n.txt"; fail "not resumed at $n ranks"; }
      same_hash "4 ranks uninterrupted vs resumed at $n ranks" "$work/straight.txt" "$work/res$n.txt"
    done
    ;;
  plan)
    source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"
    for stage in 1 3; do
      log=$work/p$stage.jsonl
      run_ok "$work/p$stage.txt" 2 "${inv[@]}" --steps 2 --dtype bf16 --zero-stage $stage --json-log "$log"
      plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 \
        --batch 2 --threads 1 --ranks 2 --nodes 1 --global-micro-batches 8 --zero-stage $stage \
        --dtype bf16 --grad-dtype fp32 --world-invariant --json) || fail "zs_plan, stage $stage"
      plan_equals_tracked "stage $stage" "$log" "$plan" params grads master optimizer comm_buffers
      sent=$(grep '"step":2,' "$log" | head -1 | grep -o '"comm_bytes":[0-9]*' | cut -d: -f2)
      want=$(grep -o '"intra_bytes_per_rank": [0-9]*' <<<"$plan" | head -1 | awk '{print $2}')
      [ -n "$sent" ] && [ "$sent" = "$want" ] ||
        fail "stage $stage: the trainer sent '$sent' bytes at step 2, zs_plan predicts '$want'"
      echo "stage $stage: bytes sent per rank per step $sent = zs_plan's (4 reduce-scatters per unit)"
      grep -m1 '"type":"header"' "$log" | grep -qF '"world_invariant":true,"global_micro_batches":8' ||
        fail "stage $stage: the log's header does not state the mode and M"
    done
    # Muon at stage 3: its u all-gather and its owners' reduce-scatter per unit with matrices.
    log=$work/muon.jsonl
    run_ok "$work/muon.txt" 2 "${inv[@]}" --steps 2 --dtype bf16 --zero-stage 3 --optimizer muon \
      --json-log "$log"
    plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 \
      --batch 2 --threads 1 --ranks 2 --nodes 1 --global-micro-batches 8 --zero-stage 3 \
      --dtype bf16 --grad-dtype fp32 --world-invariant --optimizer muon --json) || fail "zs_plan, muon"
    plan_equals_tracked "muon stage 3" "$log" "$plan" params grads master optimizer comm_buffers
    sent=$(grep '"step":2,' "$log" | head -1 | grep -o '"comm_bytes":[0-9]*' | cut -d: -f2)
    want=$(grep -o '"intra_bytes_per_rank": [0-9]*' <<<"$plan" | head -1 | awk '{print $2}')
    [ -n "$sent" ] && [ "$sent" = "$want" ] ||
      fail "muon stage 3: the trainer sent '$sent' bytes at step 2, zs_plan predicts '$want'"
    echo "muon stage 3: bytes sent per rank per step $sent = zs_plan's"
    ;;
  refused)
    timeout 120 "${mpi[@]}" -np 3 "$bin" "${base[@]}" --steps 2 --global-micro-batches 6 \
      > "$work/e.txt" 2>&1 && fail "3 ranks: exit 0"
    grep -qF "world_invariant needs a power-of-two number of ranks, not 3" "$work/e.txt" ||
      { cat "$work/e.txt"; fail "3 ranks: no message"; }
    echo "3 ranks: $(grep -m1 'error' "$work/e.txt")"
    expect "M not a multiple" "--global-micro-batches 5 is not a multiple of the 2 ranks" \
      "${base[@]}" --steps 2 --global-micro-batches 5
    expect "conflicting accumulation" "--global-micro-batches 8 at 2 ranks is 4 micro-batches per rank, not the 2 of --gradient-accumulation-steps" \
      "${inv[@]}" --steps 2 --gradient-accumulation-steps 2
    expect "k not a power of two" "world_invariant needs a power-of-two number of micro-batches per rank, not 3" \
      "${base[@]}" --steps 2 --global-micro-batches 6
    expect "bf16 gradients" "world_invariant needs fp32 gradients (grad_dtype bf16)" \
      "${inv[@]}" --steps 2 --dtype bf16 --grad-dtype bf16
    expect "no global micro-batches" "--world-invariant needs --global-micro-batches M, the micro-batches per step over all ranks, the same at every world size (--global-micro-batches 2 is this run's 1 per rank at 2 ranks)" \
      "${base[@]}" --steps 2
    run_ok "$work/s.txt" 2 "${inv[@]}" --steps 2 --save-dir "$work/ck"
    expect "resume with another M" "$work/ck/step-00000002: written in world-invariant mode with --global-micro-batches 8; this run gives 4" \
      "${base[@]}" --steps 4 --global-micro-batches 4 --resume-from "$work/ck/step-00000002"
    help_has "--world-invariant" "--global-micro-batches arg (=0)"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
