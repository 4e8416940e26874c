#!/usr/bin/env bash
# zs_train with ZeRO++ qgZ (issue 29, --zero-quantized-gradients), one case per ctest:
#   zs_train_qgz.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Every case runs 4 ranks on 2 fake nodes (ZS_FAKE_NODES=2: node size 2, block placement).
# Cases:
#   train    stages 2 and 3: the loss falls; the same bits twice, another param_hash than the
#            unquantized run and the last loss within 2% of it; the DeepSpeed key
#            zero_optimization.zero_quantized_gradients gives the flag's bits, and
#            .zeroshard_quantized_gradients_block those of --zero-quantized-gradients-block; a
#            checkpoint resumes bitwise (stage 3)
#   refused  qgZ at stage 1, a block that is not a power of two: one message naming the flag,
#            exit 2, no step; --help lists both flags
#   links    stages 2 and 3, hierarchical and flat collectives: zs_plan with the same flags
#            equals the trainer's tracked bytes, and the trainer's link counters (bytes within
#            and between nodes, all ranks, per step) equal zs_plan's counted bytes per link class
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"

export ZS_FAKE_NODES=2
qgz=(--zero-quantized-gradients)

# loss_at out step: the loss reported at that step.
loss_at() { grep -E "^step +$2/" "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }

case "$case_name" in
  train)
    for stage in 2 3; do
      s=(--zero-stage "$stage")
      run_ok "$work/q$stage.txt" 4 "${tiny[@]}" "${s[@]}" "${qgz[@]}" --steps 12
      run_ok "$work/r$stage.txt" 4 "${tiny[@]}" "${s[@]}" "${qgz[@]}" --steps 12
      run_ok "$work/p$stage.txt" 4 "${tiny[@]}" "${s[@]}" --steps 12
      first=$(loss_at "$work/q$stage.txt" 1) last=$(loss_at "$work/q$stage.txt" 12)
      plain=$(loss_at "$work/p$stage.txt" 12)
      echo "stage $stage qgZ: loss step 1 $first, step 12 $last; unquantized step 12 $plain"
      awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
        fail "stage $stage: the loss did not fall by 0.3: $first -> $last"
      awk -v a="$last" -v b="$plain" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02 * b) }' ||
        fail "stage $stage: qgZ's last loss $last is not within 2% of the unquantized $plain"
      same_hash "stage $stage qgZ twice" "$work/q$stage.txt" "$work/r$stage.txt"
      [ "$(hash_of "$work/q$stage.txt")" != "$(hash_of "$work/p$stage.txt")" ] ||
        fail "stage $stage: qgZ and the unquantized run gave the same param_hash"
    done
    echo '{"zero_optimization": {"stage": 3, "zero_quantized_gradients": true}}' > "$work/ds.json"
    run_ok "$work/ds.txt" 4 "${tiny[@]}" --steps 12 --deepspeed-config "$work/ds.json"
    same_hash "flag vs zero_optimization.zero_quantized_gradients" "$work/q3.txt" "$work/ds.txt"
    echo '{"zero_optimization": {"stage": 2, "zero_quantized_gradients": true,
           "zeroshard_quantized_gradients_block": 64}}' > "$work/ds64.json"
    run_ok "$work/ds64.txt" 4 "${tiny[@]}" --steps 12 --deepspeed-config "$work/ds64.json"
    run_ok "$work/q64.txt" 4 "${tiny[@]}" --steps 12 --zero-stage 2 "${qgz[@]}" \
      --zero-quantized-gradients-block 64
    same_hash "block 64: flags vs DeepSpeed keys" "$work/q64.txt" "$work/ds64.txt"
    [ "$(hash_of "$work/q64.txt")" != "$(hash_of "$work/q2.txt")" ] ||
      fail "block 64 and block 256 gave the same param_hash: the block did nothing"
    resumes_bitwise qgZ 4 "$work/q3.txt" "${tiny[@]}" "${qgz[@]}"
    ;;
  refused)
    expect "stage 1" "--zero-quantized-gradients quantizes the reduce-scatter of sharded gradients: --zero-stage 1" \
      "${tiny[@]}" --steps 2 "${qgz[@]}" --zero-stage 1
    [ "$expect_rc" = 2 ] || fail "stage 1: exit $expect_rc, expected 2"
    expect "block 48" "--zero-quantized-gradients-block 48 is not a power of two in 32..65536" \
      "${tiny[@]}" --steps 2 "${qgz[@]}" --zero-quantized-gradients-block 48
    [ "$expect_rc" = 2 ] || fail "block 48: exit $expect_rc, expected 2"
    help_has "--zero-quantized-gradients " "--zero-quantized-gradients-block arg (=256)"
    echo "--help: both flags"
    ;;
  links)
    for stage in 2 3; do
      for coll in hierarchical flat; do
        log=$work/$stage-$coll.jsonl
        run_ok "$work/$stage-$coll.txt" 4 "${tiny[@]}" --steps 2 --zero-stage "$stage" "${qgz[@]}" \
          --collectives "$coll" --json-log "$log"
        plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 \
          --vocab 256 --batch 4 --threads 1 --ranks 4 --nodes 2 --collectives "$coll" --dtype bf16 \
          --grad-dtype fp32 --zero-stage "$stage" "${qgz[@]}" --json) ||
          fail "zs_plan, stage $stage, $coll"
        plan_equals_tracked "stage $stage $coll" "$log" "$plan" params grads master optimizer \
          comm_buffers
        grep -qF '"qgZ cross-node all-to-all"' <<<"$plan" || fail "zs_plan lists no qgZ item"
        links_equal "stage $stage, $coll collectives" "$log" "$plan"
      done
    done
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
