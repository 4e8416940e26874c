#!/usr/bin/env bash
# Hugging Face import and export at a real model's size (docs/interop.md, "Large models"):
# writes a synthetic sharded bf16 LlamaForCausalLM directory (scripts/hf_synth_llama.py: ~5 GB
# shards, index, config.json), reads its files with dd (the disk and page cache's rate), then
# zs_train --init-from-hf of it (LoRA r=8 over an int8 base, ZeRO-3, one step) and the same run
# with --export-hf, and prints one table: time, GB/s and every rank's VmHWM, beside zs_plan's
# per-rank total for the same flags. Drops no cache: the dd line says how much of the files the
# page cache held before it read them (fincore), i.e. whether the reads were warm or cold.
#   bash scripts/hf_io_7b.sh                       LLaMA-7B: 32 layers, width 4096, 32 heads,
#                                                  FFN 11008, vocab 32000 (13.5 GB of bf16)
#   bash scripts/hf_io_7b.sh --shape 1b            22 layers, width 2048, 32 heads (4 KV), FFN 5632
#   bash scripts/hf_io_7b.sh --shape tiny          4 layers, width 512, 8 heads, FFN 1376
#   bash scripts/hf_io_7b.sh --shape L,W,H,KV,FFN,VOCAB
# Options: --dir DIR (default /tmp/zs-hf-io-SHAPE; reused when its config.json is there),
# --ranks N (2), --shard-size BYTES (5000000000), --keep (leave the directories). Environment:
# ZS_BUILD_DIR (default build), ZS_PYTHON (a python3 with numpy; default /usr/bin/python3),
# ZS_TORCH_PYTHON (torch >= 2 with transformers: loads the export, bench/hf_load_check.py).
# Disk: the model's bf16 size twice (the directory and the export).
set -euo pipefail
cd "$(dirname "$0")/.."
shape=7b dir="" ranks=2 shard=5000000000 keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --shard-size) shard=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "hf_io_7b: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $shape in
  7b) dims=(32 4096 32 32 11008 32000) ;;
  1b) dims=(22 2048 32 4 5632 32000) ;;
  tiny) dims=(4 512 8 8 1376 32000) ;;
  *,*,*,*,*,*) IFS=, read -r -a dims <<<"$shape" ;;
  *) echo "hf_io_7b: --shape '$shape' is not 7b, 1b, tiny or L,W,H,KV,FFN,VOCAB" >&2; exit 2 ;;
esac
build=${ZS_BUILD_DIR:-build}
py=${ZS_PYTHON:-/usr/bin/python3}
for b in zs_train zs_plan; do
  [ -x "$build/bin/$b" ] || { echo "hf_io_7b: no $build/bin/$b (build first)" >&2; exit 1; }
done
dir=${dir:-/tmp/zs-hf-io-${shape//,/x}}
export_dir=$dir-export
work=$(mktemp -d)
cleanup() {
  rm -rf "$work"
  if [ "$keep" = 0 ]; then rm -rf "$export_dir"; fi
}
trap cleanup EXIT
echo "hf_io_7b: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"

# (i) the directory
if [ ! -f "$dir/config.json" ]; then
  t0=$(date +%s.%N)
  "$py" scripts/hf_synth_llama.py "$dir" "${dims[@]}" "$shard" | tail -1
  echo "hf_io_7b: written in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
else
  echo "hf_io_7b: reusing $dir"
fi
files=("$dir"/model*.safetensors)
bytes=$(stat -c %s "${files[@]}" | awk '{s += $1} END {print s}')

secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
gbps() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", (s > 0 ? n / s / 1e9 : 0) }'; }

# (ii) dd over the same files, then the import
cached=$(fincore -b -n -o RES "${files[@]}" 2>/dev/null | awk '{s += $1} END {print s + 0}')
t0=$(date +%s.%N)
for f in "${files[@]}"; do dd if="$f" of=/dev/null bs=16M status=none; done
dd_s=$(secs "$t0")
cache_pct=$(awk -v c="$cached" -v b="$bytes" 'BEGIN { printf "%.0f", 100 * c / b }')

root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
args=(--init-from-hf "$dir" --lora-rank 8 --base-dtype int8 --zero-stage 3 --context 64
      --batch 1 --checkpoint-activations --steps 1 --eval-batches 1 --sample-tokens 0)
# Each rank under /usr/bin/time: its peak resident set (VmHWM) in kB, one file per rank.
run_ranks() {  # tag, extra zs_train flags...
  local tag=$1
  shift
  mpirun "${root[@]}" --oversubscribe --bind-to none -np "$ranks" bash -c \
    '/usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$work/$tag.hwm" \
    "$build/bin/zs_train" "${args[@]}" "$@" >"$work/$tag.out" 2>&1 ||
    { cat "$work/$tag.out"; echo "hf_io_7b: zs_train ($tag) failed" >&2; exit 1; }
}
hwm() {  # tag -> "r0 / r1 ... GB"
  local tag=$1 r out=""
  for ((r = 0; r < ranks; r++)); do
    out+=$(awk '{printf "%.2f", $1 * 1024 / 1e9}' "$work/$tag.hwm.$r")
    [ "$r" -lt $((ranks - 1)) ] && out+=" / "
  done
  echo "$out"
}
run_ranks import
import_s=$(grep -oE 'initial weights from .* in [0-9.]+ s' "$work/import.out" | grep -oE '[0-9.]+ s$' | cut -d' ' -f1)
[ -n "$import_s" ] || { cat "$work/import.out"; echo "hf_io_7b: no import line" >&2; exit 1; }
plan=$("$build/bin/zs_plan" --from-hf "$dir" --ranks "$ranks" --lora-rank 8 --base-dtype int8 \
  --zero-stage 3 --context 64 --batch 1 --checkpoint-activations | awk '/device total/ {print $(NF-2)}')

# (iii) the export (the same run, then --export-hf in bf16 at the default 5GB shards)
rm -rf "$export_dir"
run_ranks export --export-hf "$export_dir" --export-dtype bf16
export_s=$(grep -oE '^exported .* in [0-9.]+ s' "$work/export.out" | grep -oE '[0-9.]+ s$' | cut -d' ' -f1)
[ -n "$export_s" ] || { cat "$work/export.out"; echo "hf_io_7b: no export line" >&2; exit 1; }
out_bytes=$(stat -c %s "$export_dir"/model*.safetensors | awk '{s += $1} END {print s}')

# (iv) transformers reads the export (a peer check; needs ZS_TORCH_PYTHON: torch >= 2,
# transformers, safetensors), after zs_train has ended: the model alone in memory.
load=""
if [ -n "${ZS_TORCH_PYTHON:-}" ]; then
  load=$("$ZS_TORCH_PYTHON" bench/hf_load_check.py "$export_dir" --against "$dir" \
    --compare model.embed_tokens.weight --compare model.norm.weight \
    --compare model.layers.0.self_attn.q_proj.weight 2>/dev/null | grep '^RESULT ' || true)
fi

echo "hf_io_7b: ${dims[*]} (layers width heads kv ffn vocab): ${#files[@]} file(s), $(gbps "$bytes" 1) GB; $ranks ranks"
printf '%-44s %9s %8s  %s\n' "what" "time s" "GB/s" "VmHWM per rank, GB (zs_plan's total per rank)"
printf '%-44s %9s %8s  %s\n' "dd bs=16M, page cache held ${cache_pct}% before" "$dd_s" "$(gbps "$bytes" "$dd_s")" "-"
printf '%-44s %9s %8s  %s\n' "zs_train --init-from-hf (int8 base, LoRA 8)" "$import_s" "$(gbps "$bytes" "$import_s")" "$(hwm import) (plan $plan GB)"
printf '%-44s %9s %8s  %s\n' "zs_train --export-hf bf16 (after the import)" "$export_s" "$(gbps "$out_bytes" "$export_s")" "$(hwm export) (the whole run)"
if [ -n "${ZS_TORCH_PYTHON:-}" ]; then
  echo "hf_io_7b: AutoModelForCausalLM.from_pretrained(export, torch_dtype=bfloat16), one forward: ${load:-failed (no RESULT line)}"
else
  echo "hf_io_7b: the transformers load of the export skipped (set ZS_TORCH_PYTHON)"
fi
