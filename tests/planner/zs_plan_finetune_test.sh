#!/usr/bin/env bash
# zs_plan_finetune_test.sh ZS_PLAN: zs_plan's LoRA and frozen-base figures for a 6B model
# (--model gpt-6b: GPT-J 6B's dimensions on our GPT, 6.06e9 parameters) against the arithmetic
# of issue 16's source documents, written out here independently of the planner:
#   int8 base: one byte per matrix element + one fp32 scale per matrix row, the vectors (norms,
#     biases) in the compute dtype: about 6 GB, against 4 bytes per parameter (about 24 GB) fp32;
#   AdamW: 8 bytes (m and v) per trainable fp32 parameter, plus a 4-byte master under bf16.
# Every record of this shape is a multiple of 128 bytes, so no padding enters the figures.
# Also: the table prints the frozen base, the trainable count and bytes per trainable parameter;
# flags that cannot plan are refused with exit 2 and one message.
set -euo pipefail
zs_plan=$1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# The integer (or number) after "KEY": in zs_plan's --json output.
field() { grep -o "\"$1\": [0-9.e+-]*" <<<"$2" | head -1 | awk '{print $2}'; }

L=28 C=4096 F=16384 V=50400 T=2048 r=8
n_mat=$((2 * V * C + T * C + L * (3 * C * C + C * C + F * C + C * F)))  # wte, wpe, lm_head, blocks
rows=$((2 * V + T + L * (3 * C + C + F + C)))
n_vec=$((L * (9 * C + F) + 2 * C))  # ln1, ln2 (w, b), qkv.b, proj.b, fc.b, fc_proj.b; ln_f
n_frozen=$((n_mat + n_vec))
n_lora=$((L * r * ((C + 3 * C) + (C + C) + (C + F) + (F + C))))  # A [r, in] + B [out, r] each
echo "gpt-6b: $n_frozen frozen parameters ($n_mat in matrices with $rows rows), $n_lora trainable"

plan() { "$zs_plan" --model gpt-6b --lora-rank $r --json "$@"; }

# fp32 compute, int8 base, one rank: the documents' 6 GB and 8 bytes per trainable parameter.
j=$(plan --dtype fp32 --base-dtype int8 --zero-stage 0)
[ "$(field num_frozen_params "$j")" = $n_frozen ] || fail "frozen count $(field num_frozen_params "$j")"
[ "$(field num_trainable_params "$j")" = $n_lora ] || fail "trainable count"
int8_fp32=$((n_mat + 4 * rows + 4 * n_vec))
[ "$(field frozen_bytes "$j")" = $int8_fp32 ] ||
  fail "int8 base: $(field frozen_bytes "$j") bytes, expected $int8_fp32"
[ "$(field frozen_record_bytes "$j")" = $int8_fp32 ] || fail "int8 record bytes"
[ "$(field optimizer_bytes "$j")" = $((8 * n_lora)) ] ||
  fail "AdamW states $(field optimizer_bytes "$j"), expected 8 x $n_lora"
[ "$(field master_bytes "$j")" = 0 ] || fail "fp32 parameters are their own master"
[ "$(field optimizer_bytes_per_trainable_param "$j")" = 8.0 ] || fail "bytes per trainable param"
[ "$(field params_bytes "$j")" = $((4 * n_lora)) ] || fail "adapter bytes"
[ "$(field grads_bytes "$j")" = $((4 * n_lora)) ] || fail "adapter gradient bytes"
# The int8 base is converted to fp32 unit by unit: the largest unit's matrices (the embeddings).
[ "$(field frozen_convert_bytes "$j")" = $((4 * (V + T) * C)) ] || fail "conversion buffer"
echo "int8 base: $int8_fp32 bytes; AdamW $((8 * n_lora)) bytes = 8 per trainable parameter"

# The same base in fp32: 4 bytes per parameter.
j=$(plan --dtype fp32 --base-dtype fp32 --zero-stage 0)
[ "$(field frozen_bytes "$j")" = $((4 * n_frozen)) ] ||
  fail "fp32 base: $(field frozen_bytes "$j") bytes, expected $((4 * n_frozen))"
[ "$(field frozen_convert_bytes "$j")" = 0 ] || fail "an fp32 base under fp32 converts nothing"
echo "fp32 base: $((4 * n_frozen)) bytes"

# bf16 compute: vectors in bf16, an fp32 master (4) beside Adam's m and v (8); at 2 ranks and
# stage 3 each rank holds half of the base.
j=$(plan --dtype bf16 --base-dtype int8 --zero-stage 0)
int8_bf16=$((n_mat + 4 * rows + 2 * n_vec))
[ "$(field frozen_bytes "$j")" = $int8_bf16 ] || fail "int8 base under bf16"
[ "$(field master_bytes "$j")" = $((4 * n_lora)) ] || fail "bf16: fp32 master"
[ "$(field optimizer_bytes "$j")" = $((8 * n_lora)) ] || fail "bf16: AdamW states"
j=$(plan --dtype bf16 --base-dtype int8 --zero-stage 3 --ranks 2)
[ "$(field frozen_bytes "$j")" = $((int8_bf16 / 2)) ] || fail "stage 3, 2 ranks: half the base"
[ "$(field optimizer_bytes "$j")" = $((4 * n_lora)) ] || fail "stage 3, 2 ranks: half of m, v"
j=$(plan --dtype bf16 --zero-stage 0)
[ "$(field frozen_bytes "$j")" = $((2 * n_frozen)) ] || fail "default base: the compute dtype"
echo "bf16 compute: int8 base $int8_bf16 bytes, halved per rank at stage 3 over 2 ranks"

# The table names the base, the trainable count and the bytes per trainable parameter.
t=$("$zs_plan" --model gpt-6b --lora-rank $r --dtype fp32 --base-dtype int8 --zero-stage 0)
echo "$t"
grep -q "14,680,064 trainable" <<<"$t" || fail "table: trainable count"
grep -Eq "^  frozen base +6,068,946,688 +6\.07 +full copy: int8 matrices" <<<"$t" || fail "table: frozen base row"
grep -Eq "^  optimizer states .*8\.00 bytes/trainable param" <<<"$t" || fail "table: AdamW bytes"
grep -q "LoRA r=8 on qkv,proj,fc,fc_proj, frozen base in int8" <<<"$t" || fail "table: config"

# Refused: adapters without a shape, a base dtype without adapters, a bad target or dtype, LoRA
# on the CUDA GPT.
refuse() {
  local pattern=$1
  shift
  set +e
  out=$("$zs_plan" "$@" 2>&1)
  rc=$?
  set -e
  [ $rc = 2 ] || fail "exit $rc for $*: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "no '$pattern' for $*: $out"
}
refuse "--lora-rank needs the model's linears" --params 6e9 --lora-rank 8
refuse "--base-dtype needs a frozen base" --model gpt2 --base-dtype int8
refuse "lora target \"attn\" is not one of" --model gpt2 --lora-rank 8 --lora-targets qkv,attn
refuse "--base-dtype 'int4' is not one of" --model gpt2 --lora-rank 8 --base-dtype int4
refuse "CPU backend only" --model gpt2 --lora-rank 8 --device cuda
refuse "cuda gpt: RMSNorm \(norm rmsnorm\) is implemented on the CPU backend only" --model llama-7b --device cuda
refuse "--int8-compute applies to an int8 base" --model gpt2 --lora-rank 8 --int8-compute dequantize
echo "PASS"
