#!/usr/bin/env bash
# zs_train with ZeRO++ qwZ (issue 29, --zero-quantized-weights), one case per ctest:
#   zs_train_qwz.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   train    2 ranks: the loss falls, the log's header records the flags; the same bits twice,
#            another param_hash than plain ZeRO-3 and the last loss within 2% of it; the DeepSpeed
#            key zero_optimization.zero_quantized_weights gives the flag's bits; a checkpoint
#            resumes bitwise
#   refused  qwZ at stages 0-2, a block that is not a power of two in 32..65536, the DeepSpeed key
#            at stage 1: one message naming the flag (or key), exit 2, no step; --help
#   plan     zs_plan with the same flags equals the trainer's tracked bytes and its bytes sent per
#            step (int8 chunks: 1 + 4/B bytes per element instead of 2)
#   links    4 ranks on 2 fake nodes (ZS_FAKE_NODES=2), hierarchical and flat collectives: the
#            trainer's link counters (bytes within and between nodes, all ranks, per step) equal
#            zs_plan's counted bytes per link class
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"

qwz=(--zero-quantized-weights)

# loss_at out step: the loss reported at that step.
loss_at() { grep -E "^step +$2/" "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }

case "$case_name" in
  train)
    log=$work/q.jsonl
    run_ok "$work/q.txt" 2 "${tiny[@]}" "${qwz[@]}" --steps 12 --json-log "$log"
    run_ok "$work/q2.txt" 2 "${tiny[@]}" "${qwz[@]}" --steps 12
    run_ok "$work/p.txt" 2 "${tiny[@]}" --steps 12
    first=$(loss_at "$work/q.txt" 1) last=$(loss_at "$work/q.txt" 12) plain=$(loss_at "$work/p.txt" 12)
    echo "qwZ: loss step 1 $first, step 12 $last; plain ZeRO-3 step 12 $plain"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
      fail "the loss did not fall by 0.3: $first -> $last"
    awk -v a="$last" -v b="$plain" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02 * b) }' ||
      fail "qwZ's last loss $last is not within 2% of plain ZeRO-3's $plain"
    for text in '"zero-quantized-weights":true' '"zero-quantized-weights-block":256'; do
      head -1 "$log" | grep -qF -- "$text" || fail "the log's header has no $text"
    done
    same_hash "qwZ twice" "$work/q.txt" "$work/q2.txt"
    [ "$(hash_of "$work/q.txt")" != "$(hash_of "$work/p.txt")" ] ||
      fail "qwZ and plain ZeRO-3 gave the same param_hash: the switch did nothing"
    echo '{"zero_optimization": {"stage": 3, "zero_quantized_weights": true}}' > "$work/ds.json"
    run_ok "$work/ds.txt" 2 "${tiny[@]}" --steps 12 --deepspeed-config "$work/ds.json"
    same_hash "flag vs zero_optimization.zero_quantized_weights" "$work/q.txt" "$work/ds.txt"
    resumes_bitwise qwZ 2 "$work/q.txt" "${tiny[@]}" "${qwz[@]}"
    ;;
  refused)
    expect2() {
      expect "$@"
      [ "$expect_rc" = 2 ] || fail "$1: exit $expect_rc, expected 2"
    }
    for stage in 0 1 2; do
      expect2 "stage $stage" "--zero-quantized-weights quantizes stage 3's parameter all-gather: --zero-stage $stage does not gather parameters" \
        "${tiny[@]}" --steps 2 "${qwz[@]}" --zero-stage $stage
    done
    for b in 48 16 131072; do
      expect2 "block $b" "--zero-quantized-weights-block $b is not a power of two in 32..65536" \
        "${tiny[@]}" --steps 2 "${qwz[@]}" --zero-quantized-weights-block $b
    done
    echo '{"zero_optimization": {"stage": 1, "zero_quantized_weights": true}}' > "$work/ds.json"
    expect2 "DeepSpeed key at stage 1" "zero_quantized_weights in $work/ds.json" \
      "${tiny[@]}" --steps 2 --deepspeed-config "$work/ds.json"
    help_has "--zero-quantized-weights " "--zero-quantized-weights-block arg (=256)"
    echo "--help: both flags"
    ;;
  plan)
    for block in 256 64 1024; do
      log=$work/run-$block.jsonl
      qb=("${qwz[@]}" --zero-quantized-weights-block "$block")
      run_ok "$work/p.txt" 2 "${tiny[@]}" --steps 2 "${qb[@]}" --json-log "$log"
      plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 \
        --batch 4 --threads 1 --ranks 2 --nodes 1 --dtype bf16 --grad-dtype fp32 "${qb[@]}" --json) ||
        fail "zs_plan, block $block"
      plan_equals_tracked "block $block" "$log" "$plan" params grads master optimizer comm_buffers
      sent=$(grep '"step":2,' "$log" | head -1 | grep -o '"comm_bytes":[0-9]*' | cut -d: -f2)
      want=$(grep -o '"intra_bytes_per_rank": [0-9]*' <<<"$plan" | head -1 | awk '{print $2}')
      [ -n "$sent" ] && [ "$sent" = "$want" ] ||
        fail "block $block: the trainer sent '$sent' bytes at step 2, zs_plan predicts '$want'"
      echo "block $block: bytes sent per rank per step $sent = zs_plan's"
    done
    ;;
  links)
    export ZS_FAKE_NODES=2
    for coll in hierarchical flat; do
      log=$work/$coll.jsonl
      run_ok "$work/$coll.txt" 4 "${tiny[@]}" --steps 2 "${qwz[@]}" \
        --collectives "$coll" --json-log "$log"
      plan=$("$(dirname "$bin")/zs_plan" --layers 2 --heads 2 --width 64 --context 32 --vocab 256 \
        --batch 4 --threads 1 --ranks 4 --nodes 2 --collectives "$coll" --dtype bf16 --grad-dtype fp32 \
        "${qwz[@]}" --json) || fail "zs_plan, $coll"
      links_equal "$coll collectives" "$log" "$plan"
    done
    unset ZS_FAKE_NODES
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
