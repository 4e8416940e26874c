#!/usr/bin/env bash
# zs_plan --from-hf DIR (apps/zs_plan/zs_plan.cc, interop/hf_config.h): LLaMA-7B's config.json as
# transformers wrote it plans exactly what --model llama-7b plans (every number of --json equal;
# only the model's name differs), at two dtypes and stages, and so does Qwen3-0.6B's as --model
# qwen3-0.6b (596,049,920 parameters); a flag that disagrees with config.json, an unsupported field
# and a Gemma directory are refused naming them; Mistral's sliding_window is accepted when it
# covers the context and refused naming --context otherwise.
#   zs_plan_from_hf.sh ZS_PLAN WORKDIR
set -euo pipefail
plan=$1 work=$2
rm -rf "$work" && mkdir -p "$work/llama"
cat >"$work/llama/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "bos_token_id": 0, "eos_token_id": 1,
 "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
 "initializer_range": 0.02, "max_sequence_length": 2048, "max_position_embeddings": 2048,
 "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "pad_token_id": -1,
 "rms_norm_eps": 1e-06, "torch_dtype": "float16", "transformers_version": "4.27.0.dev0",
 "use_cache": true, "vocab_size": 32000}
JSON
for flags in "--dtype fp32 --zero-stage 3" "--dtype bf16 --zero-stage 1 --ranks 4"; do
  # shellcheck disable=SC2086
  "$plan" --from-hf "$work/llama" --json $flags | grep -v '"model":' >"$work/a.json"
  # shellcheck disable=SC2086
  "$plan" --model llama-7b --json $flags | grep -v '"model":' >"$work/b.json"
  if ! cmp -s "$work/a.json" "$work/b.json"; then
    diff "$work/a.json" "$work/b.json" || true
    echo "FAIL: --from-hf plans differently from --model llama-7b ($flags)"
    exit 1
  fi
  echo "--from-hf = --model llama-7b ($flags): $(wc -l <"$work/a.json") lines equal"
done
# Qwen3-0.6B's config.json (transformers 4.51) at the preset's context: --model qwen3-0.6b.
mkdir -p "$work/qwen3"
cat >"$work/qwen3/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
 "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
 "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
 "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
 "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
 "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
 "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}
JSON
for flags in "--dtype bf16 --zero-stage 3 --ranks 8 --batch 1" "--dtype fp32 --zero-stage 2 --batch 2"; do
  # shellcheck disable=SC2086
  "$plan" --from-hf "$work/qwen3" --context 4096 --json $flags | grep -v '"model":' >"$work/a.json"
  # shellcheck disable=SC2086
  "$plan" --model qwen3-0.6b --json $flags | grep -v '"model":' >"$work/b.json"
  if ! cmp -s "$work/a.json" "$work/b.json"; then
    diff "$work/a.json" "$work/b.json" || true
    echo "FAIL: --from-hf plans differently from --model qwen3-0.6b ($flags)"
    exit 1
  fi
  grep -qF '"num_params": 596049920' "$work/a.json" || { echo "FAIL: Qwen3-0.6B's count"; exit 1; }
  echo "--from-hf qwen3 = --model qwen3-0.6b ($flags): $(wc -l <"$work/a.json") lines equal"
done
# The documents' LLaMA-6B arithmetic from a config.json (LLaMA's dimensions with 28 layers:
# 5,928,882,176 parameters): fp32 weights about 24 GB (4 bytes/param), AdamW's fp32 states about
# 48 GB (8 bytes/param), an int8 frozen base about 6 GB (1 byte/param plus a scale per row).
mkdir -p "$work/llama6b"
sed 's/"num_hidden_layers": 32/"num_hidden_layers": 28/' "$work/llama/config.json" \
  >"$work/llama6b/config.json"
field() {  # field NAME: the number NAME in $work/p.json
  grep -oE "\"$1\": [0-9.e+]+" "$work/p.json" | head -1 | awk '{print $2}'
}
"$plan" --from-hf "$work/llama6b" --dtype fp32 --zero-stage 0 --json >"$work/p.json"
[ "$(field num_params)" = 5928882176 ] || { echo "FAIL: LLaMA-6B has $(field num_params) params"; exit 1; }
[ "$(field params_bytes)" = 23715528704 ] || { echo "FAIL: fp32 weights $(field params_bytes)"; exit 1; }
[ "$(field optimizer_bytes)" = 47431057408 ] || { echo "FAIL: AdamW states $(field optimizer_bytes)"; exit 1; }
"$plan" --from-hf "$work/llama6b" --dtype fp32 --zero-stage 0 --lora-rank 8 --base-dtype int8 \
  --json >"$work/p.json"
frozen=$(field frozen_bytes)
# int8 matrices (1 byte/param) + one fp32 scale per row + the fp32 norm weights.
[ "$frozen" -ge 5928882176 ] && [ "$frozen" -lt 5960000000 ] ||
  { echo "FAIL: int8 base $frozen bytes"; exit 1; }
echo "LLaMA-6B (28 layers): 5,928,882,176 params; fp32 weights 23.72 GB, AdamW states 47.43 GB," \
  "int8 base $frozen bytes"
expect() {  # expect NEEDLE ARGS...: zs_plan fails and says NEEDLE
  local needle=$1
  shift
  if "$plan" "$@" >"$work/out.txt" 2>&1 || ! grep -qF -- "$needle" "$work/out.txt"; then
    cat "$work/out.txt"
    echo "FAIL: expected a refusal with: $needle"
    exit 1
  fi
  echo "refused: $needle"
}
expect '"num_hidden_layers" is 32, the model'"'"'s layers is 30' --from-hf "$work/llama" --layers 30
expect '"max_position_embeddings" is 2048, the run'"'"'s context 4096' \
  --from-hf "$work/llama" --context 4096
mkdir -p "$work/scaled"
sed 's/"use_cache": true/"rope_scaling": {"factor": 8.0, "rope_type": "yarn"}/' \
  "$work/llama/config.json" >"$work/scaled/config.json"
expect '"rope_scaling.rope_type" is "yarn"' --from-hf "$work/scaled"
expect '--from-hf takes no --params or --model' --from-hf "$work/llama" --model llama-7b
expect '"head_dim" is 128, the model'"'"'s head dim is 64' --from-hf "$work/qwen3" --head-dim 64
mkdir -p "$work/gemma"
sed -e 's/"model_type": "qwen3"/"model_type": "gemma2"/' -e 's/Qwen3ForCausalLM/Gemma2ForCausalLM/' \
  "$work/qwen3/config.json" >"$work/gemma/config.json"
expect '"model_type" is "gemma2" (Gemma2ForCausalLM): zeroshard'"'"'s decoder lacks Gemma'"'"'s components' \
  --from-hf "$work/gemma"
mkdir -p "$work/mistral"
sed -e 's/"model_type": "llama"/"model_type": "mistral"/' -e 's/LlamaForCausalLM/MistralForCausalLM/' \
  -e 's/"use_cache": true/"sliding_window": 1024/' "$work/llama/config.json" >"$work/mistral/config.json"
"$plan" --from-hf "$work/mistral" --context 1024 --json >/dev/null ||
  { echo "FAIL: a sliding window covering the context was refused"; exit 1; }
expect '"sliding_window" is 1024, shorter than the run'"'"'s context 2048 (--context)' \
  --from-hf "$work/mistral"
echo PASS
