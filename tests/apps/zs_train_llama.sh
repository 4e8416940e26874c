#!/usr/bin/env bash
# zs_train on a Llama-form model (issue 27: --family llama, grouped-query attention), one case per
# ctest:
#   zs_train_llama.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# The model: 2 blocks, 4 query heads sharing 2 key/value heads, width 64, context 32, RMSNorm,
# rotary positions, SwiGLU, no biases, on the shipped corpus's bytes.
# Cases:
#   train    2 ranks, ZeRO-3, bf16: the banner names the components, the last reported loss is
#            below the first; ZeRO stages 0-3 give one param_hash in fp32 and one in bf16
#   resume   saved at step 3 and resumed to 6: param_hash and losses equal to an uninterrupted
#            run; the 2-rank checkpoint resumes at 4 ranks; a resume with another --kv-heads or
#            --norm is refused naming the field
#   refused  a bad --norm, --kv-heads not dividing --heads, rotary positions with an odd head dim,
#            --device cuda with --family llama: one message naming the flag, exit 2, no step;
#            --help groups the model's flags and names the alias
#   plan     zs_plan --family llama with the same flags equals the trainer's tracked bytes
#            (parameters, gradients, master, optimizer, buffers, host) at stages 0, 2, 3
#   tied     --tie-embeddings on (one parameter): the banner says so and the parameter count
#            drops by vocab x width; stages 0-3 give one param_hash; resume at step 3 is bitwise
#            and a 2-rank checkpoint resumes at 4 ranks; an untied resume is refused naming --tie-embeddings;
#            --device cuda with it is refused naming it; zs_plan equals the tracked bytes at stage 3
#   qwen3    --family qwen3 --head-dim 24 (q/k norms; 4 heads of 24 on a width of 64), tied: the
#            banner names them; stages 0-3 give one param_hash; --export-hf writes
#            Qwen3ForCausalLM (head_dim 24) and --init-from-hf of it trains 3 steps at 2 ranks as
#            qwen3; a resume
#            with another --head-dim is refused naming it; --device cuda is refused naming the
#            head_dim; zs_plan equals the tracked bytes at stage 3
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/plan_check_lib.sh"

arch=(--family llama --layers 2 --heads 4 --context 32)
llama=("${arch[@]}" --kv-heads 2 --width 64)
opts=(--batch 4 --warmup 2 --eval-every 3 --eval-batches 1 --sample-tokens 0 --threads 1)
small=("${llama[@]}" "${opts[@]}")

# loss_at out step: the loss reported at that step.
loss_at() { grep -E "^step +$2/" "$1" | grep -oE 'loss [0-9.]+' | head -1 | awk '{print $2}'; }

case "$case_name" in
  train)
    run_ok "$work/t.txt" 2 "${small[@]}" --zero-stage 3 --dtype bf16 --steps 12 --log-every 1
    grep -qF "(2 layers, width 64, 4 heads, context 32; llama: rmsnorm, rotary (theta 10000), swiglu, FFN 256, 2 KV heads, biases qkv off, proj off, mlp off)" \
      "$work/t.txt" || { cat "$work/t.txt"; fail "the banner does not name the components"; }
    first=$(loss_at "$work/t.txt" 1) last=$(loss_at "$work/t.txt" 12)
    echo "loss: step 1 $first, step 12 $last"
    [ -n "$first" ] && [ -n "$last" ] || fail "no loss lines"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
      fail "the loss did not fall by 0.3: $first -> $last"
    for dtype in fp32 bf16; do
      for stage in 0 1 2 3; do
        run_ok "$work/$dtype$stage.txt" 2 "${small[@]}" --zero-stage $stage --dtype $dtype --steps 4
      done
      for stage in 1 2 3; do
        same_hash "$dtype stage 0 vs $stage" "$work/${dtype}0.txt" "$work/$dtype$stage.txt"
      done
    done
    [ "$(hash_of "$work/fp320.txt")" != "$(hash_of "$work/bf160.txt")" ] ||
      fail "fp32 and bf16 gave the same param_hash: the dtype did not reach the model"
    ;;
  resume)
    run_ok "$work/full.txt" 2 "${small[@]}" --steps 6
    run_ok "$work/a.txt" 2 "${small[@]}" --steps 6 --save-dir "$work/ckpt" --save-every 3
    run_ok "$work/b.txt" 2 "${small[@]}" --steps 6 --resume-from "$work/ckpt/step-00000003"
    grep -qF "resumed from $work/ckpt/step-00000003 (step 3" "$work/b.txt" || fail "not resumed"
    same_hash "uninterrupted vs resumed at step 3" "$work/full.txt" "$work/b.txt"
    for s in 4 5 6; do
      [ "$(loss_at "$work/full.txt" $s)" = "$(loss_at "$work/b.txt" $s)" ] ||
        fail "step $s: loss $(loss_at "$work/full.txt" $s) vs $(loss_at "$work/b.txt" $s)"
    done
    run_ok "$work/r4.txt" 4 "${small[@]}" --steps 6 --resume-from "$work/ckpt/step-00000003"
    grep -qF "(step 3, written by 2 ranks at stage 3)" "$work/r4.txt" ||
      { cat "$work/r4.txt"; fail "2 -> 4 ranks: not resumed"; }
    [ -n "$(hash_of "$work/r4.txt")" ] || fail "2 -> 4 ranks: no param_hash"
    echo "2 -> 4 ranks: resumed, $(grep -E '^step +6/6' "$work/r4.txt" | cut -c1-40)"
    expect "other --kv-heads" "the checkpoint does not match this run's model: --kv-heads 4 in this run, 2 in the checkpoint" \
      "${arch[@]}" --width 64 --kv-heads 4 "${opts[@]}" --steps 6 --resume-from "$work/ckpt/step-00000003"
    expect "other --norm" "the checkpoint does not match this run's model: --norm layernorm in this run, rmsnorm in the checkpoint" \
      "${small[@]}" --steps 6 --norm layernorm --resume-from "$work/ckpt/step-00000003"
    ;;
  refused)
    # A refused flag exits 2 on every rank (a usage error, as zs_plan's).
    expect2() {
      expect "$@"
      [ "$expect_rc" = 2 ] || fail "$1: exit $expect_rc, expected 2"
    }
    expect2 "bad --norm" "--norm 'batchnorm' is not one of layernorm, rmsnorm" \
      "${small[@]}" --steps 2 --norm batchnorm
    expect2 "--kv-heads" "--kv-heads 3 does not divide --heads 4" "${arch[@]}" --width 64 \
      --kv-heads 3 "${opts[@]}" --steps 2
    expect2 "odd head dim" "rotary positions (--family llama) need an even head dim: --width 36 / --heads 4 = 9" \
      "${arch[@]}" --width 36 "${opts[@]}" --steps 2
    expect2 "rotary on GPT-2" "rotary positions (--positions rotary) need an even head dim: --width 36 / --heads 4 = 9" \
      --layers 2 --heads 4 --width 36 --steps 2 --positions rotary
    expect2 "cuda" "--device cuda with family llama: cuda gpt: RMSNorm (norm rmsnorm) is implemented on the CPU backend only" \
      "${small[@]}" --steps 2 --device cuda
    expect2 "family" "--family 'bert' is not one of gpt2, llama" --family bert --steps 2
    expect2 "PEFT module" "--export-adapters $work/peft: LoRA target qkv has no PEFT module in a Llama-style model" \
      "${small[@]}" --steps 2 --lora-rank 4 --lora-targets qkv,o_proj --export-adapters "$work/peft"
    [ ! -e "$work/peft" ] || fail "--export-adapters refused, but $work/peft was written"
    # --help: the model's flags in their own group, the family's default.
    "$bin" --help > "$work/help.txt" || fail "--help"
    for text in "Model (dimensions, then --family's components" "--family arg (=gpt2)" \
                "--kv-heads arg" "--rope-theta arg" "Batch and compute:" \
                "Engine: sharding and precision:"; do
      grep -qF -- "$text" "$work/help.txt" || { cat "$work/help.txt"; fail "--help: no '$text'"; }
    done
    echo "--help: the groups"
    ;;
  plan)
    zs_plan=$(dirname "$bin")/zs_plan
    for cfg in "--zero-stage 3 --dtype bf16 --grad-dtype fp32" "--zero-stage 0 --dtype fp32" \
               "--zero-stage 2 --dtype bf16 --grad-dtype fp32 --offload"; do
      # shellcheck disable=SC2206
      flags=($cfg)
      log=$work/run.jsonl
      rm -f "$log"
      run_ok "$work/p.txt" 2 "${small[@]}" --steps 2 "${flags[@]}" --json-log "$log"
      plan=$("$zs_plan" "${llama[@]}" --vocab 256 --batch 4 --threads 1 --ranks 2 "${flags[@]}" --json) ||
        fail "zs_plan $cfg"
      plan_equals_tracked "$cfg" "$log" "$plan" params grads master optimizer comm_buffers \
        host_offload
    done
    ;;
  tied)
    tied=("${small[@]}" --tie-embeddings on)
    run_ok "$work/u.txt" 2 "${small[@]}" --steps 2
    run_ok "$work/t0.txt" 2 "${tied[@]}" --steps 4 --zero-stage 0
    count() { grep -oE '[0-9]+ trainable params' "$1" | head -1 | cut -d' ' -f1; }
    nu=$(count "$work/u.txt") nt=$(count "$work/t0.txt")
    [ -n "$nu" ] && [ -n "$nt" ] || fail "no parameter count in the banners"
    [ $((nu - nt)) = $((256 * 64)) ] || fail "tied: $nt parameters vs untied $nu"
    grep -qF "mlp off, tied embeddings)" "$work/t0.txt" || fail "the banner does not say tied"
    echo "tied: $nt parameters, untied $nu (vocab x width = $((256 * 64)) fewer)"
    for stage in 1 2 3; do
      run_ok "$work/t$stage.txt" 2 "${tied[@]}" --steps 4 --zero-stage $stage
      same_hash "tied stage 0 vs $stage" "$work/t0.txt" "$work/t$stage.txt"
    done
    run_ok "$work/full.txt" 2 "${tied[@]}" --steps 6
    run_ok "$work/a.txt" 2 "${tied[@]}" --steps 6 --save-dir "$work/ckpt" --save-every 3
    run_ok "$work/b.txt" 2 "${tied[@]}" --steps 6 --resume-from "$work/ckpt/step-00000003"
    same_hash "tied: uninterrupted vs resumed at step 3" "$work/full.txt" "$work/b.txt"
    # 4 ranks take another global batch: the run continues (the same bits at any world size is
    # issue 30's), from the 2-rank checkpoint's one tied parameter.
    run_ok "$work/r4.txt" 4 "${tied[@]}" --steps 6 --resume-from "$work/ckpt/step-00000003"
    grep -qF "(step 3, written by 2 ranks at stage 3)" "$work/r4.txt" ||
      { cat "$work/r4.txt"; fail "tied, 2 -> 4 ranks: not resumed"; }
    [ -n "$(hash_of "$work/r4.txt")" ] || fail "tied, 2 -> 4 ranks: no param_hash"
    expect "untied resume" "--tie-embeddings off in this run, on in the checkpoint" "${small[@]}" --steps 6 \
      --resume-from "$work/ckpt/step-00000003"
    expect "tied on cuda" "cuda gpt: tied embeddings (tied_embeddings) is implemented on the CPU backend only" \
      --layers 2 --heads 4 --width 64 --context 32 --tie-embeddings on --steps 2 --device cuda
    zs_plan=$(dirname "$bin")/zs_plan
    log=$work/run.jsonl
    flags=(--zero-stage 3 --dtype bf16 --grad-dtype fp32)
    run_ok "$work/p.txt" 2 "${tied[@]}" --steps 2 "${flags[@]}" --json-log "$log"
    plan=$("$zs_plan" "${llama[@]}" --tie-embeddings on --vocab 256 --batch 4 --threads 1 --ranks 2 \
      "${flags[@]}" --json) || fail "zs_plan tied"
    plan_equals_tracked "tied stage 3" "$log" "$plan" params grads master optimizer comm_buffers \
      host_offload
    ;;
  qwen3)
    qwen=(--family qwen3 --layers 2 --heads 4 --kv-heads 2 --width 64 --head-dim 24 --context 32
          --tie-embeddings on)
    q=("${qwen[@]}" "${opts[@]}")
    run_ok "$work/q0.txt" 2 "${q[@]}" --steps 4 --zero-stage 0 --dtype fp32
    grep -qF "qwen3: rmsnorm, rotary (theta 10000), swiglu, FFN 256, 2 KV heads, head dim 24, q/k norms, biases qkv off, proj off, mlp off, tied embeddings)" \
      "$work/q0.txt" || { cat "$work/q0.txt"; fail "the banner does not name qwen3's components"; }
    for stage in 1 2 3; do
      run_ok "$work/q$stage.txt" 2 "${q[@]}" --steps 4 --zero-stage $stage --dtype fp32
      same_hash "qwen3 stage 0 vs $stage" "$work/q0.txt" "$work/q$stage.txt"
    done
    run_ok "$work/e.txt" 2 "${q[@]}" --steps 4 --save-dir "$work/ckpt" --save-every 2 \
      --export-hf "$work/hf"
    grep -qF '"Qwen3ForCausalLM"' "$work/hf/config.json" || fail "the export is not Qwen3's"
    grep -qF '"head_dim": 24' "$work/hf/config.json" || fail "the export has no head_dim 24"
    run_ok "$work/i.txt" 2 --init-from-hf "$work/hf" --context 32 "${opts[@]}" --steps 3
    grep -qF "qwen3: rmsnorm" "$work/i.txt" || { cat "$work/i.txt"; fail "--init-from-hf: not qwen3"; }
    [ -n "$(loss_at "$work/i.txt" 3)" ] || { cat "$work/i.txt"; fail "--init-from-hf: no step 3"; }
    echo "--init-from-hf of the Qwen3 export: step 3 loss $(loss_at "$work/i.txt" 3)"
    expect "other --head-dim" "--head-dim 16 in this run, 24 in the checkpoint" \
      "${qwen[@]/24/16}" "${opts[@]}" --steps 4 --resume-from "$work/ckpt/step-00000002"
    expect "qwen3 on cuda" "cuda gpt: RMSNorm (norm rmsnorm) is implemented on the CPU backend only" \
      "${q[@]}" --steps 2 --device cuda
    expect "head_dim on cuda" "cuda gpt: a head_dim other than width / heads (head_dim 24, width 64, heads 4)" \
      --layers 2 --heads 4 --width 64 --head-dim 24 --context 32 --steps 2 --device cuda
    zs_plan=$(dirname "$bin")/zs_plan
    log=$work/run.jsonl
    flags=(--zero-stage 3 --dtype bf16 --grad-dtype fp32)
    run_ok "$work/p.txt" 2 "${q[@]}" --steps 2 "${flags[@]}" --json-log "$log"
    plan=$("$zs_plan" "${qwen[@]}" --vocab 256 --batch 4 --threads 1 --ranks 2 "${flags[@]}" \
      --json) || fail "zs_plan qwen3"
    plan_equals_tracked "qwen3 stage 3" "$log" "$plan" params grads master optimizer comm_buffers \
      host_offload
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
