#!/usr/bin/env bash
# zs_train's flags mean the same in zs_plan, and a flag is never silently ignored (issue 40, items 3
# and 4; apps/common/engine_options.h, [Note: dependent flags]), one case per ctest:
#   zs_train_flag_meaning.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   plan_matches  zs_train's default run and a small Llama (2 ranks) against zs_plan given the same
#                 flags and --ranks 2: every category of the per-rank peak (the final record's
#                 memory_bytes, max over ranks) equals the plan to the byte, the total included;
#                 the tolerance is oneDNN's GEMM scratchpads (gemm_scratchpads_bytes), which the
#                 library sizes for the thread count: a rank whose mpirun binding gives it other
#                 threads than zs_plan's --threads 0 (cores / ranks) may differ by at most them
#                 (the Llama pins --threads 1: exact). --batch is the per-rank micro-batch and
#                 --grad-dtype defaults to fp32 in both.
#   dependent     a flag given without the flag it refines is refused naming both, by zs_train
#                 (one message, exit 2 on every rank, no step) and by zs_plan (exit 2): the ZeRO++
#                 blocks, the LoRA flags, --prefetch below stage 3, --export-adapters, and
#                 zs_train's own (--keep, --export-dtype, --sample-prompt, --weight-decay); the same
#                 flags with what they refine are accepted
#   rope          --rope-theta on learned positions is refused; a non-finite or non-positive theta
#                 is refused by zs_train, by zs_plan and in a Hugging Face config.json
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

zs_plan=$(dirname "$bin")/zs_plan
short=(--steps 2 --eval-every 0 --sample-tokens 0)

expect2() {
  expect "$@"
  [ "$expect_rc" = 2 ] || fail "$1: exit $expect_rc, expected 2"
}

# plan_refuses label text args...: zs_plan exits 2 with one line holding text.
plan_refuses() {
  local label=$1 text=$2 out rc
  shift 2
  out=$("$zs_plan" "$@" 2>&1)
  rc=$?
  [ $rc = 2 ] || fail "zs_plan $label: exit $rc, expected 2: $out"
  grep -qF -- "$text" <<<"$out" || fail "zs_plan $label: no '$text' in: $out"
  [ "$(wc -l <<<"$out")" = 1 ] || fail "zs_plan $label: more than one line: $out"
  echo "zs_plan $label: exit 2, $out"
}

# field json name: a number from zs_plan --json (the first occurrence).
field() { grep -o "\"$2\": [0-9]*" <<<"$1" | head -1 | awk '{print $2}'; }

# plan_matches_run label log plan tolerance: each category's tracked peak equals the plan's
# <category>_bytes; activations and the total within `tolerance` bytes.
plan_matches_run() {
  local label=$1 log=$2 plan=$3 tol=$4 mem c t p d line=""
  mem=$(tail -1 "$log" | grep -o '"memory_bytes":{[^}]*}')
  [ -n "$mem" ] || fail "$label: no memory_bytes in the final record"
  tracked() { grep -o "\"$1\":[0-9]*" <<<"$mem" | cut -d: -f2; }
  for c in params grads master optimizer comm_buffers host_offload frozen; do
    t=$(tracked $c) p=$(field "$plan" "${c}_bytes")
    [ -n "$t" ] && [ "$t" = "$p" ] || fail "$label: $c tracked '$t', planned '$p'"
  done
  for c in activations total; do
    t=$(tracked $c)
    p=$(field "$plan" "$([ $c = total ] && echo device_total || echo $c)_bytes")
    d=$((t > p ? t - p : p - t))
    [ -n "$t" ] && [ "$d" -le "$tol" ] ||
      fail "$label: $c tracked '$t', planned '$p' (difference $d > $tol)"
    line+="$c tracked $t planned $p; "
  done
  echo "$label: ${line}every other category equal (tolerance $tol bytes: the GEMM scratchpads)"
}

case "$case_name" in
  plan_matches)
    log=$work/default.jsonl
    run_ok "$work/d.txt" 2 "${short[@]}" --json-log "$log"
    plan=$("$zs_plan" --ranks 2 --json) || fail "zs_plan --ranks 2"
    [ "$(field "$plan" micro_batch_sequences)" = 16 ] || fail "default micro-batch: $plan"
    grep -qF '"grad_dtype": "fp32"' <<<"$plan" || fail "default --grad-dtype is not fp32"
    plan_matches_run "default run" "$log" "$plan" "$(field "$plan" gemm_scratchpads_bytes)"
    llama=(--family llama --kv-heads 2 --layers 2 --heads 4 --width 64 --context 32 --threads 1)
    log=$work/llama.jsonl
    run_ok "$work/l.txt" 2 "${llama[@]}" --batch 4 "${short[@]}" --json-log "$log"
    plan=$("$zs_plan" "${llama[@]}" --batch 4 --ranks 2 --json) || fail "zs_plan llama"
    [ "$(field "$plan" micro_batch_sequences)" = 4 ] || fail "--batch 4 is not 4 sequences per rank"
    plan_matches_run "small llama" "$log" "$plan" 0
    # The same global batch, named by zs_plan's own flag: the same plan.
    plan2=$("$zs_plan" "${llama[@]}" --global-batch 8 --ranks 2 --json)
    [ "$(field "$plan2" device_total_bytes)" = "$(field "$plan" device_total_bytes)" ] ||
      fail "--global-batch 8 at 2 ranks differs from --batch 4"
    plan_refuses "both batches" "--global-batch and --batch both set the micro-batch" \
      --batch 4 --global-batch 8 --ranks 2
    ;;
  dependent)
    ck=$work/adapters
    for args in "--zero-quantized-weights-block 128|--zero-quantized-weights-block applies to --zero-quantized-weights, which is not given" \
                "--zero-quantized-gradients-block 64|--zero-quantized-gradients-block applies to --zero-quantized-gradients, which is not given" \
                "--lora-alpha 16|--lora-alpha applies to LoRA adapters: give --lora-rank" \
                "--lora-targets qkv|--lora-targets applies to LoRA adapters: give --lora-rank" \
                "--prefetch 2 --zero-stage 2|--prefetch applies to --zero-stage 3 (it gathers parameters ahead of use), not 2" \
                "--optimizer-state-block 128|--optimizer-state-block applies to --optimizer-state-dtype int8, not fp32" \
                "--base-dtype int8|--base-dtype needs a frozen base: give --lora-rank" \
                "--lora-rank 4 --int8-compute dequantize|--int8-compute applies to an int8 base: give --base-dtype int8"; do
      # shellcheck disable=SC2206
      flags=(${args%%|*})
      text=${args#*|}
      expect2 "${flags[*]}" "$text" "${tiny[@]}" --steps 2 "${flags[@]}"
      plan_refuses "${flags[*]}" "$text" "${flags[@]}"
    done
    expect2 "--export-adapters" "--export-adapters writes LoRA adapters: give --lora-rank" \
      "${tiny[@]}" --steps 2 --export-adapters "$ck"
    # zs_train's own: checkpoints, exports, the sample, AdamW's decay.
    expect2 "--keep" "--keep applies to --save-dir, which is not given" "${tiny[@]}" --steps 2 --keep 2
    expect2 "--export-dtype" "--export-dtype applies to --export-safetensors, --export-hf or --export-adapters, none of which is given" \
      "${tiny[@]}" --steps 2 --export-dtype bf16
    expect2 "--sample-prompt" "--sample-prompt applies to the sample, and --sample-tokens 0 writes none" \
      --layers 2 --heads 2 --width 64 --context 32 --batch 4 --threads 1 --steps 2 \
      --sample-tokens 0 --sample-prompt "Once"
    expect2 "--weight-decay" "--weight-decay applies to --optimizer adamw, not sgd" \
      "${tiny[@]}" --steps 2 --optimizer sgd --weight-decay 0.01
    # Muon's flags: given without --optimizer muon, out of range, or with what it does not do.
    expect2 "--muon-momentum" "--muon-momentum applies to --optimizer muon, not adamw" \
      "${tiny[@]}" --steps 2 --muon-momentum 0.9
    plan_refuses "--muon-ns-steps" "--muon-ns-steps applies to --optimizer muon, not sgd" \
      --optimizer sgd --muon-ns-steps 3
    expect2 "--muon-momentum 1" "--muon-momentum 1 is outside [0, 1)" \
      "${tiny[@]}" --steps 2 --optimizer muon --muon-momentum 1
    expect2 "muon offload" "--optimizer muon with --offload-optimizer is not implemented" \
      "${tiny[@]}" --steps 2 --optimizer muon --offload-optimizer
    expect2 "muon int8" "--optimizer-state-dtype int8 applies to --optimizer adamw, not muon" \
      "${tiny[@]}" --steps 2 --optimizer muon --optimizer-state-dtype int8
    expect2 "muon --momentum" "--momentum applies to --optimizer sgd, not muon (Muon's is --muon-momentum)" \
      "${tiny[@]}" --steps 2 --optimizer muon --momentum 0.9
    # SGD applies no weight decay: saying 0 is not a contradiction (torch_grad_parity says it).
    run_ok "$work/sgd0.txt" 2 "${tiny[@]}" --steps 2 --optimizer sgd --weight-decay 0
    # With what they refine, the same flags are accepted (zs_plan plans them).
    for args in "--zero-quantized-weights --zero-quantized-weights-block 128" \
                "--zero-quantized-gradients --zero-quantized-gradients-block 64" \
                "--lora-rank 4 --lora-alpha 16 --lora-targets qkv" "--prefetch 2" \
                "--optimizer-state-dtype int8 --optimizer-state-block 128"; do
      # shellcheck disable=SC2206
      flags=($args)
      "$zs_plan" --ranks 2 "${flags[@]}" > "$work/p.txt" 2>&1 || { cat "$work/p.txt"; fail "zs_plan $args"; }
    done
    run_ok "$work/ok.txt" 2 "${tiny[@]}" --steps 2 --zero-quantized-weights --zero-quantized-weights-block 128
    echo "accepted with what they refine"
    ;;
  rope)
    expect2 "learned positions" "--rope-theta applies to rotary positions (--positions rotary or --family llama), not learned ones" \
      "${tiny[@]}" --steps 2 --rope-theta 500000
    plan_refuses "learned positions" "--rope-theta applies to rotary positions" --rope-theta 500000
    plan_refuses "gpt2 preset" "--rope-theta applies to rotary positions" --model gpt2 --rope-theta 1e6
    for theta in nan inf -1 0; do
      expect2 "theta $theta" "--rope-theta $theta must be finite and above 1" \
        "${tiny[@]}" --steps 2 --family llama --rope-theta "$theta"
      plan_refuses "theta $theta" "--rope-theta $theta must be finite and above 1" \
        --family llama --rope-theta "$theta"
    done
    # A Llama config.json whose rope_theta is not a theta: refused naming the key.
    for theta in -1 0; do
      hf=$work/hf$theta
      mkdir -p "$hf"
      cat > "$hf/config.json" <<EOF
{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
 "num_attention_heads": 2, "num_key_value_heads": 2, "hidden_size": 64, "intermediate_size": 128,
 "vocab_size": 256, "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": $theta,
 "tie_word_embeddings": false, "hidden_act": "silu"}
EOF
      plan_refuses "config.json theta $theta" "\"rope_theta\" is $theta; rotary positions need a finite theta above 1" \
        --from-hf "$hf"
      expect2 "--init-from-hf theta $theta" "\"rope_theta\" is $theta; rotary positions need a finite theta above 1" \
        "${tiny[@]}" --steps 2 --init-from-hf "$hf"
    done
    # A rotary model takes it.
    "$zs_plan" --family llama --rope-theta 500000 > "$work/p.txt" 2>&1 || { cat "$work/p.txt"; fail "zs_plan theta 500000"; }
    echo "rotary: --rope-theta 500000 planned"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
