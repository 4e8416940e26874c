#!/usr/bin/env bash
# zs_train with ZeRO++ hpZ (issue 29, --zero-hpz-partition-size K), one case per ctest:
#   zs_train_hpz.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases (4 ranks on 2 fake nodes, ZS_FAKE_NODES=2, unless said):
#   train    hpZ gives plain ZeRO-3's bits (the backward re-gathers the forward's values from the
#            node), also with qwZ, activation checkpointing and gradient accumulation, and with
#            the DeepSpeed key; the inter-node bytes fall; a checkpoint resumes bitwise; the
#            loss is never 0 and falls (DeepSpeed #4851, #5059)
#   refused  hpZ at stages 0-2, on one node (2 ranks), K that does not divide a node's ranks,
#            with hybrid sharding, K < 1: one message naming the switch, no step; --help
#   plan     zs_plan with the same flags equals the trainer's tracked bytes (the secondary shard
#            under params) and, for flat and hierarchical collectives, its link counters
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"

hpz=(--zero-hpz-partition-size 2)
export ZS_FAKE_NODES=2

loss_at() { grep -E "^step +$2/" "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }
inter_of() { grep -oE '[0-9.]+ [KMG]?i?B between nodes' "$1" | head -1; }

case "$case_name" in
  train)
    for extra in "" "--zero-quantized-weights" "--checkpoint-activations --gradient-accumulation-steps 2"; do
      run_ok "$work/p.txt" 4 "${tiny[@]}" --steps 6 $extra
      run_ok "$work/h.txt" 4 "${tiny[@]}" --steps 6 $extra "${hpz[@]}"
      same_hash "plain vs hpZ${extra:+ with $extra}" "$work/p.txt" "$work/h.txt"
      echo "  between nodes per step: plain $(inter_of "$work/p.txt"), hpZ $(inter_of "$work/h.txt")"
      [ "$(inter_of "$work/p.txt")" != "$(inter_of "$work/h.txt")" ] ||
        fail "hpZ sent as much between nodes as plain ZeRO-3"
    done
    first=$(loss_at "$work/h.txt" 1) last=$(loss_at "$work/h.txt" 6)
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b > 0 && b < a - 0.1) }' ||
      fail "hpZ's loss did not fall from $first (or reached 0): $last"
    echo '{"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2}}' > "$work/ds.json"
    run_ok "$work/ds.txt" 4 "${tiny[@]}" --steps 6 --checkpoint-activations \
      --gradient-accumulation-steps 2 --deepspeed-config "$work/ds.json"
    same_hash "flag vs zero_optimization.zero_hpz_partition_size" "$work/h.txt" "$work/ds.txt"
    run_ok "$work/a.txt" 4 "${tiny[@]}" "${hpz[@]}" --steps 8 --save-dir "$work/ckpt" --save-every 4
    run_ok "$work/b.txt" 4 "${tiny[@]}" "${hpz[@]}" --steps 8 --resume-from "$work/ckpt/step-00000004"
    grep -qF "resumed from $work/ckpt/step-00000004" "$work/b.txt" || { cat "$work/b.txt"; fail "not resumed"; }
    same_hash "hpZ uninterrupted vs resumed at step 4" "$work/a.txt" "$work/b.txt"
    r4=$(loss_at "$work/a.txt" 5) b4=$(loss_at "$work/b.txt" 5)
    [ "$r4" = "$b4" ] || fail "the first loss after resume $b4 differs from the uninterrupted $r4 (DeepSpeed #7606)"
    echo "first loss after resume $b4 = uninterrupted"
    ;;
  refused)
    for stage in 0 1 2; do
      expect "stage $stage" "--zero-hpz-partition-size keeps secondary shards of stage 3's gathered parameters: --zero-stage $stage" \
        "${tiny[@]}" --steps 2 "${hpz[@]}" --zero-stage $stage
    done
    unset ZS_FAKE_NODES
    expect "one node" "zero_hpz_partition_size 2 (hpZ) on one node" "${tiny[@]}" --steps 2 "${hpz[@]}"
    export ZS_FAKE_NODES=2
    expect "K does not divide a node" "zero_hpz_partition_size 2 (hpZ) does not divide the 1 ranks of a node" \
      "${tiny[@]}" --steps 2 "${hpz[@]}"
    expect "hybrid sharding" "zero_hpz_partition_size (hpZ) with hybrid sharding (shard group size 1) is not implemented" \
      "${tiny[@]}" --steps 2 "${hpz[@]}" --shard-group-size 1
    expect "K 0" "--zero-hpz-partition-size 0 is not 1 (off) or more" "${tiny[@]}" --steps 2 --zero-hpz-partition-size 0
    echo '{"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 2}}' > "$work/ds.json"
    expect "DeepSpeed key at stage 2" "zero_hpz_partition_size in $work/ds.json" \
      "${tiny[@]}" --steps 2 --deepspeed-config "$work/ds.json"
    help_has "--zero-hpz-partition-size arg (=1)"
    ;;
  plan)
    for coll in flat hierarchical; do
      log=$work/$coll.jsonl
      run_ok "$work/$coll.txt" 4 "${tiny[@]}" --steps 2 "${hpz[@]}" --zero-quantized-weights \
        --collectives "$coll" --json-log "$log"
      plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 \
        --batch 4 --threads 1 --ranks 4 --nodes 2 --collectives "$coll" --dtype bf16 --grad-dtype fp32 \
        "${hpz[@]}" --zero-quantized-weights --json) || fail "zs_plan, $coll"
      plan_equals_tracked "$coll" "$log" "$plan" params grads master optimizer comm_buffers
      for class in intra inter; do
        got=$(tail -1 "$log" | grep -o "\"comm_bytes_${class}_all_ranks\":[0-9]*" | cut -d: -f2)
        want=$(/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["communication"]["counted_'$class'_bytes_all_ranks"])' <<<"$plan")
        [ -n "$got" ] && [ "$got" = "$want" ] ||
          fail "$coll: $class-node bytes per step counted '$got', zs_plan '$want'"
        echo "$coll collectives: $class-node bytes per step (all ranks) $got = zs_plan's"
      done
    done
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
