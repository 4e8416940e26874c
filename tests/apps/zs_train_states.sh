#!/usr/bin/env bash
# zs_train with bf16 and int8 AdamW states (issue 28, --optimizer-state-dtype), one case per ctest:
#   zs_train_states.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# The model: the tiny GPT-2 of zs_train_lib.sh (its matrices get narrow states; the positions,
# biases and norms, under 4096 elements, keep fp32).
# Cases:
#   train    2 ranks, int8 states: the loss falls, the log's header records the flags; stages 0, 3
#            and 2 with offload and ZS_MAX_ISA=scalar|avx2 give one param_hash (int8), LoRA adapters
#            on an int8 base with int8 states one at stages 0 and 3, stages 0 and 3
#            another (bf16), and
#            another (int8, the dynamic code book), all differ from fp32 states
#   resume   int8 states saved at step 3 and resumed to 6: param_hash and losses equal to an
#            uninterrupted run; the 2-rank checkpoint resumes at 4 ranks; resuming it with bf16 or
#            fp32 states or the other code book is refused naming both
#   refused  an unknown state dtype or code book, a block that is not a power of two, int8 states
#            with SGD, a block or a code book without int8 states: one message naming the flag,
#            exit 2, no step; --help
#   plan     zs_plan with the same flags equals the trainer's tracked bytes (int8 and bf16 states,
#            offload too); zs_plan reproduces the 6B-parameter figure (int8 AdamW states 2 + 8/256
#            bytes per parameter, about 12 GB) and shows 7B ZeRO-3 offloaded at 8 ranks
#   named    --optimizer-state-fp32 'embed.*,*.fc.weight' (int8 states): stages 0, 3 and 2 offloaded
#            give one param_hash, unlike the run without names; the header records the flag; the
#            tracker's optimizer bytes equal the formula and zs_plan's with the same flags; a
#            checkpoint resumes with the same set in another order (bitwise) and is refused with
#            another set, naming both; an unmatched pattern, names with fp32 states, names for a
#            bare parameter count and a negative --optimizer-state-min-numel are refused
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"

int8=(--optimizer-state-dtype int8)

# loss_at out step: the loss reported at that step.
loss_at() { grep -E "^step +$2/" "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }

case "$case_name" in
  train)
    log=$work/t.jsonl
    run_ok "$work/t.txt" 2 "${tiny[@]}" "${int8[@]}" --steps 12 --log-every 1 --json-log "$log"
    first=$(loss_at "$work/t.txt" 1) last=$(loss_at "$work/t.txt" 12)
    echo "int8 states: loss step 1 $first, step 12 $last"
    [ -n "$first" ] && [ -n "$last" ] || fail "no loss lines"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
      fail "the loss did not fall by 0.3: $first -> $last"
    for text in '"optimizer-state-dtype":"int8"' '"optimizer-state-block":256' \
      '"optimizer-state-code":"float8"'; do
      head -1 "$log" | grep -qF -- "$text" || fail "the log's header has no $text"
    done
    for states in int8 bf16; do
      for stage in 0 3; do
        run_ok "$work/$states$stage.txt" 2 "${tiny[@]}" --optimizer-state-dtype $states \
          --zero-stage $stage --steps 4
      done
      same_hash "$states states: stage 0 vs 3" "$work/${states}0.txt" "$work/${states}3.txt"
    done
    for stage in 0 3; do
      run_ok "$work/dyn$stage.txt" 2 "${tiny[@]}" "${int8[@]}" --optimizer-state-code dynamic \
        --zero-stage $stage --steps 4
    done
    same_hash "int8 dynamic states: stage 0 vs 3" "$work/dyn0.txt" "$work/dyn3.txt"
    [ "$(hash_of "$work/dyn0.txt")" != "$(hash_of "$work/int80.txt")" ] ||
      fail "the dynamic and float8 code books gave the same param_hash: the setting did nothing"
    # Every ISA gives the same bits (ZS_MAX_ISA caps the kernels; the CPU may lack AVX-512).
    for isa in scalar avx2; do
      ZS_MAX_ISA=$isa run_ok "$work/isa-$isa.txt" 2 "${tiny[@]}" "${int8[@]}" --zero-stage 0 --steps 4
      same_hash "int8 states: ZS_MAX_ISA=$isa vs the CPU's best" "$work/int80.txt" "$work/isa-$isa.txt"
    done
    run_ok "$work/off.txt" 2 "${tiny[@]}" "${int8[@]}" --zero-stage 2 --offload-optimizer --steps 4
    same_hash "int8 states: stage 0 vs 2 offloaded" "$work/int80.txt" "$work/off.txt"
    # LoRA adapters (under 4096 elements each) with int8 states: --optimizer-state-min-numel 0.
    lora=(--lora-rank 4 --lora-alpha 8 --base-dtype int8 --optimizer-state-min-numel 0)
    for stage in 0 3; do
      run_ok "$work/lora$stage.txt" 2 "${tiny[@]}" "${int8[@]}" "${lora[@]}" --zero-stage $stage \
        --steps 4
    done
    same_hash "LoRA on an int8 base, int8 states: stage 0 vs 3" "$work/lora0.txt" "$work/lora3.txt"
    run_ok "$work/fp32.txt" 2 "${tiny[@]}" --zero-stage 0 --steps 4
    for states in int8 bf16 dyn; do
      [ "$(hash_of "$work/fp32.txt")" != "$(hash_of "$work/${states}0.txt")" ] ||
        fail "fp32 and $states states gave the same param_hash: the setting did nothing"
    done
    ;;
  resume)
    run_ok "$work/full.txt" 2 "${tiny[@]}" "${int8[@]}" --steps 6
    run_ok "$work/a.txt" 2 "${tiny[@]}" "${int8[@]}" --steps 6 --save-dir "$work/ckpt" \
      --save-every 3
    ckpt=$work/ckpt/step-00000003
    run_ok "$work/b.txt" 2 "${tiny[@]}" "${int8[@]}" --steps 6 --resume-from "$ckpt"
    grep -qF "resumed from $ckpt (step 3" "$work/b.txt" || { cat "$work/b.txt"; fail "not resumed"; }
    same_hash "uninterrupted vs resumed at step 3" "$work/full.txt" "$work/b.txt"
    for s in 4 5 6; do
      [ "$(loss_at "$work/full.txt" $s)" = "$(loss_at "$work/b.txt" $s)" ] ||
        fail "step $s: loss $(loss_at "$work/full.txt" $s) vs $(loss_at "$work/b.txt" $s)"
    done
    run_ok "$work/r4.txt" 4 "${tiny[@]}" "${int8[@]}" --steps 6 --resume-from "$ckpt"
    grep -qF "(step 3, written by 2 ranks at stage 3)" "$work/r4.txt" ||
      { cat "$work/r4.txt"; fail "2 -> 4 ranks: not resumed"; }
    [ -n "$(hash_of "$work/r4.txt")" ] || fail "2 -> 4 ranks: no param_hash"
    echo "2 -> 4 ranks: resumed, $(grep -E '^step +6/6' "$work/r4.txt" | cut -c1-40)"
    saved="int8 (block 256, float8 codes, fp32 under 4096 elements)"
    expect "bf16 states" "optimizer states are $saved in the checkpoint, bf16 (fp32 under 4096 elements) in this run" \
      "${tiny[@]}" --optimizer-state-dtype bf16 --steps 6 --resume-from "$ckpt"
    expect "fp32 states" "optimizer states are $saved in the checkpoint, fp32 in this run" \
      "${tiny[@]}" --steps 6 --resume-from "$ckpt"
    expect "dynamic codes" "optimizer states are $saved in the checkpoint, int8 (block 256, dynamic codes, fp32 under 4096 elements) in this run" \
      "${tiny[@]}" "${int8[@]}" --optimizer-state-code dynamic --steps 6 --resume-from "$ckpt"
    ;;
  refused)
    expect2() {
      expect "$@"
      [ "$expect_rc" = 2 ] || fail "$1: exit $expect_rc, expected 2"
    }
    expect2 "unknown dtype" "--optimizer-state-dtype 'fp8' is not one of fp32, bf16, int8" \
      "${tiny[@]}" --steps 2 --optimizer-state-dtype fp8
    expect2 "block 100" "--optimizer-state-block 100 is not a power of two in 64..1048576" \
      "${tiny[@]}" --steps 2 "${int8[@]}" --optimizer-state-block 100
    expect2 "block 32" "--optimizer-state-block 32 is not a power of two in 64..1048576" \
      "${tiny[@]}" --steps 2 "${int8[@]}" --optimizer-state-block 32
    expect2 "sgd" "--optimizer-state-dtype int8 applies to --optimizer adamw, not sgd" \
      "${tiny[@]}" --steps 2 "${int8[@]}" --optimizer sgd
    expect2 "unknown code book" "--optimizer-state-code 'fp4' is not one of float8, dynamic" \
      "${tiny[@]}" --steps 2 "${int8[@]}" --optimizer-state-code fp4
    expect2 "code book without int8" "--optimizer-state-code applies to --optimizer-state-dtype int8, not bf16" \
      "${tiny[@]}" --steps 2 --optimizer-state-dtype bf16 --optimizer-state-code dynamic
    expect2 "block without int8" "--optimizer-state-block applies to --optimizer-state-dtype int8, not bf16" \
      "${tiny[@]}" --steps 2 --optimizer-state-dtype bf16 --optimizer-state-block 128
    "$bin" --help > "$work/help.txt" || fail "--help"
    for text in "--optimizer-state-dtype arg (=fp32)" "--optimizer-state-block arg (=256)" \
      "--optimizer-state-code arg (=float8)"; do
      grep -qF -- "$text" "$work/help.txt" || fail "--help: no '$text'"
    done
    echo "--help: the three flags"
    ;;
  plan)
    zs_plan=$(dirname "$bin")/zs_plan
    model=(--layers 2 --heads 2 --width 64 --context 32)
    for cfg in "--zero-stage 3 --optimizer-state-dtype int8" \
               "--zero-stage 0 --optimizer-state-dtype bf16" \
               "--zero-stage 2 --optimizer-state-dtype int8 --optimizer-state-block 64 --offload"; do
      # shellcheck disable=SC2206
      flags=($cfg)
      tflags=("${flags[@]/--offload/--offload-optimizer}")
      log=$work/run.jsonl
      rm -f "$log"
      run_ok "$work/p.txt" 2 "${tiny[@]}" --steps 2 "${tflags[@]}" --json-log "$log"
      plan=$("$zs_plan" "${model[@]}" --vocab 256 --batch 4 --threads 1 --ranks 2 --dtype bf16 \
        --grad-dtype fp32 "${flags[@]}" --json) || fail "zs_plan $cfg"
      plan_equals_tracked "$cfg" "$log" "$plan" params grads master optimizer comm_buffers \
        host_offload
    done
    # The documents' figure: 6e9 parameters in 31 units of one parameter each (units_for_param_count:
    # 3 of 193548388, 28 of 193548387), int8 AdamW states: n + 4 ceil(n / 256) bytes per moment.
    want=0
    for n in 193548388 193548388 193548388; do want=$((want + 2 * (n + 4 * ((n + 255) / 256))));
    done
    for _ in $(seq 28); do
      n=193548387
      want=$((want + 2 * (n + 4 * ((n + 255) / 256))))
    done
    got=$("$zs_plan" --params 6e9 --zero-stage 0 "${int8[@]}" --json |
      grep -o '"optimizer_bytes": [0-9]*' | awk '{print $2}')
    [ "$got" = "$want" ] || fail "6B int8 AdamW states: planned '$got', expected $want"
    "$zs_plan" --params 6e9 --zero-stage 0 "${int8[@]}" | grep -E "optimizer states" ||
      fail "zs_plan's table"
    echo "6B parameters, int8 AdamW states: $got bytes ($(awk -v b="$got" 'BEGIN { printf "%.2f", b / 1e9 }') GB)"
    for states in fp32 int8; do
      host=$("$zs_plan" --model llama-7b --ranks 8 --zero-stage 3 --offload \
        --optimizer-state-dtype $states --json | grep -o '"host_offload_bytes": [0-9]*' |
        awk '{print $2}')
      echo "llama-7b, ZeRO-3, 8 ranks, offloaded, $states states: host $host bytes per rank"
      eval "host_$states=$host"
    done
    # shellcheck disable=SC2154
    [ "$host_int8" -lt "$host_fp32" ] || fail "int8 states do not shrink the host memory"
    ;;
  named)
    named=(--optimizer-state-fp32 'embed.*,*.fc.weight')
    log=$work/n.jsonl
    run_ok "$work/n0.txt" 2 "${tiny[@]}" "${int8[@]}" "${named[@]}" --zero-stage 0 --steps 4 \
      --json-log "$log"
    head -1 "$log" | grep -qF '"optimizer-state-fp32":"embed.*,*.fc.weight"' ||
      fail "the log's header has no --optimizer-state-fp32"
    run_ok "$work/n3.txt" 2 "${tiny[@]}" "${int8[@]}" "${named[@]}" --zero-stage 3 --steps 4
    run_ok "$work/n2.txt" 2 "${tiny[@]}" "${int8[@]}" "${named[@]}" --zero-stage 2 \
      --offload-optimizer --steps 4
    same_hash "named: stage 0 vs 3" "$work/n0.txt" "$work/n3.txt"
    same_hash "named: stage 0 vs 2 offloaded" "$work/n0.txt" "$work/n2.txt"
    run_ok "$work/u0.txt" 2 "${tiny[@]}" "${int8[@]}" --zero-stage 0 --steps 4
    [ "$(hash_of "$work/u0.txt")" != "$(hash_of "$work/n0.txt")" ] ||
      fail "the names changed nothing"
    # The formula at stage 0 (every rank holds every moment), per moment: fp32 4n for embed.wte
    # and fc.weight (named) and the parameters under 4096 elements (52992 elements in all);
    # int8 n + 4 ceil(n / 256) for qkv.weight 12288 (x2), proj.weight 4096 (x2), fc_proj.weight
    # 16384 (x2) and lm_head.weight 16384: 83200 bytes. 2 x (4 x 52992 + 83200) = 590336.
    got=$(tail -1 "$log" | grep -o '"optimizer":[0-9]*' | head -1 | cut -d: -f2)
    [ "$got" = 590336 ] || fail "named: optimizer bytes $got, the formula gives 590336"
    zs_plan=$(dirname "$bin")/zs_plan
    model=(--layers 2 --heads 2 --width 64 --context 32 --vocab 256 --batch 4 --threads 1 --ranks 2
           --dtype bf16 --grad-dtype fp32)
    plan=$("$zs_plan" "${model[@]}" --zero-stage 0 "${int8[@]}" "${named[@]}" --json) ||
      fail "zs_plan with names"
    plan_equals_tracked "named, stage 0" "$log" "$plan" params grads master optimizer comm_buffers
    grep -qF '"optimizer_states": "int8 (block 256, float8 codes, fp32 under 4096 elements and for [*.fc.weight, embed.*])"' \
      <<<"$plan" || fail "zs_plan's optimizer_states: $(grep -o '"optimizer_states": "[^"]*"' <<<"$plan")"
    # Resume: the same set in another order continues bitwise; another set is refused.
    run_ok "$work/a.txt" 2 "${tiny[@]}" "${int8[@]}" "${named[@]}" --steps 6 --save-dir "$work/ckpt" \
      --save-every 3
    run_ok "$work/full.txt" 2 "${tiny[@]}" "${int8[@]}" "${named[@]}" --steps 6
    ckpt=$work/ckpt/step-00000003
    run_ok "$work/b.txt" 2 "${tiny[@]}" "${int8[@]}" --optimizer-state-fp32 '*.fc.weight,embed.*' \
      --steps 6 --resume-from "$ckpt"
    same_hash "named: uninterrupted vs resumed (patterns reordered)" "$work/full.txt" "$work/b.txt"
    expect "another set" "optimizer states are int8 (block 256, float8 codes, fp32 under 4096 elements and for [*.fc.weight, embed.*]) in the checkpoint, int8 (block 256, float8 codes, fp32 under 4096 elements and for [embed.*]) in this run" \
      "${tiny[@]}" "${int8[@]}" --optimizer-state-fp32 'embed.*' --steps 6 --resume-from "$ckpt"
    expect "unmatched" "--optimizer-state-fp32: optimizer.state_fp32 pattern 'block.*.mlp.*' matches no trainable parameter (names are unit.param, e.g. embed.wte)" \
      "${tiny[@]}" "${int8[@]}" --optimizer-state-fp32 'embed.wte,block.*.mlp.*' --steps 2
    [ "$expect_rc" = 2 ] || fail "unmatched pattern: exit $expect_rc, expected 2"
    expect "fp32 states" "--optimizer-state-fp32 applies to --optimizer-state-dtype bf16 or int8, not fp32" \
      "${tiny[@]}" "${named[@]}" --steps 2
    [ "$expect_rc" = 2 ] || fail "names with fp32 states: exit $expect_rc, expected 2"
    expect "min numel" "--optimizer-state-min-numel -1 must not be negative" \
      "${tiny[@]}" "${int8[@]}" --optimizer-state-min-numel -1 --steps 2
    if "$zs_plan" --params 1e6 "${int8[@]}" "${named[@]}" > "$work/p.txt" 2>&1; then
      fail "zs_plan --params with names: exit 0"
    fi
    grep -qF "pattern 'embed.*' matches no trainable parameter (the model's parameters have no names)" \
      "$work/p.txt" || { cat "$work/p.txt"; fail "zs_plan --params with names: message"; }
    echo "zs_plan --params with names: $(cat "$work/p.txt")"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
