#!/usr/bin/env bash
# A full fine-tune at Llama-3.2-1B's shape on one machine (docs/benchmarks/real-size.md): 16 layers,
# width 2048, 32 heads / 8 KV heads, FFN 8192, Llama-3's 128,256-token vocabulary, tied embeddings,
# rope theta 500000 with llama3 scaling; ZeRO-3 over 2 ranks, int8 optimizer states, bf16
# gradients, no prefetch, activation checkpointing, context 512, the LM head in row chunks where
# its logits would be large (--head-chunk auto). Prints zs_plan's per-rank total, then zs_train's
# steps, tokens/s and every rank's VmHWM, then the PyTorch peer on the same shape
# (bench/torch_full_ft.py: transformers' LlamaForCausalLM, fp32 weights, AdamW(fused=True),
# gradient checkpointing, one process) under a memory limit, whose outcome (its peak, or the
# allocation it could not make) is reported as it is.
# With --save DIR: the run saves after every step into DIR (a full checkpoint: fp32 master and int8
# optimizer states), then a second run resumes from the checkpoint of the next-to-last step and
# ends at the same step: the save and the resume's GB/s beside dd over the same files, and the
# two runs' param_hash, which must be equal. DIR needs twice the checkpoint's ~7.5 GB.
# Then PyTorch FSDP2 (fully_shard per decoder layer, gloo) at 2 ranks x 1 thread, fp32, each rank
# under --fsdp2-limit-gb (default 11.6: what each of zeroshard's ranks peaks at with 16 layers).
# --torch-only skips zeroshard's runs.
# usage: bash scripts/llama1b_full.sh [--steps N] [--layers L] [--torch-limit-gb G] [--save DIR]
#                                     [--torch-only] [--fsdp2-limit-gb G]
# Environment: ZS_BUILD_DIR (build), ZS_PYTHON (/usr/bin/python3), ZS_TORCH_PYTHON (torch >= 2
# with transformers; unset: the peer is skipped). Needs ~23 GB at 16 layers: run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=3 layers=16 limit_gb=21 fsdp_gb=11.6 save="" torch_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --save) save=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --torch-limit-gb) limit_gb=$2; shift 2 ;;
    --torch-only) torch_only=1; shift ;;
    --fsdp2-limit-gb) fsdp_gb=$2; shift 2 ;;
    *) echo "llama1b_full: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=${ZS_BUILD_DIR:-build}
py=${ZS_PYTHON:-/usr/bin/python3}
tpy=${ZS_TORCH_PYTHON:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "llama1b_full: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
model=(--family llama --layers "$layers" --width 2048 --heads 32 --kv-heads 8 --ffn 8192
       --vocab 128256 --tie-embeddings on --rope-theta 500000
       --rope-scaling llama3:factor=32,low=1,high=4,original=8192)
mem=(--context 512 --batch 1 --zero-stage 3 --optimizer-state-dtype int8 --grad-dtype bf16
     --prefetch 0 --checkpoint-activations --threads 1)
plan=$("$build/bin/zs_plan" "${model[@]}" "${mem[@]}" --ranks 2 --json |
       "$py" -c 'import json,sys; print(json.load(sys.stdin)["device_total_bytes"])')
echo "zs_plan: $(awk -v b="$plan" 'BEGIN { printf "%.2f GiB", b / 1073741824 }') per rank"
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
saving=()
if [ -n "$save" ]; then
  [ "$steps" -ge 2 ] || { echo "llama1b_full: --save needs --steps 2 or more" >&2; exit 2; }
  rm -rf "$save"
  saving=(--save-dir "$save" --save-every 1 --keep 2)
fi
train=("$build/bin/zs_train" "${model[@]}" "${mem[@]}" --steps "$steps" --lr 1e-4 --warmup 1
       --eval-every 0 --eval-batches 1 --sample-tokens 0)
if [ "$torch_only" = 1 ]; then
  zs_rc=skipped
  echo "zeroshard: skipped (--torch-only)"
else
  mpirun "${root[@]}" --oversubscribe --bind-to none -np 2 "${train[@]}" "${saving[@]}" \
    --json-log "$work/z.jsonl" > "$work/z.txt" 2>&1 || zs_rc=$?
  grep -E '^(init: [0-9.]+ s \(|start-up|step|peak memory|process peak|saved|param_hash)' "$work/z.txt"
  if [ "${zs_rc:-0}" != 0 ]; then
    echo "zeroshard: exit ${zs_rc}:"
    grep -E 'error|signal|Killed' "$work/z.txt" | head -3
  else
    "$py" - "$work/z.jsonl" "$plan" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
rss = r["peak_rss_bytes_per_rank"]
print("zeroshard: %.1f s/step, %.2f tok/s, VmHWM %s GiB per rank vs plan %.2f GiB (%.2fx)" %
      (r["median_step_ms"] / 1000, r["median_tokens_per_s"],
       ", ".join("%.2f" % (b / 2**30) for b in rss), float(sys.argv[2]) / 2**30,
       max(rss) / float(sys.argv[2])))
PY
  fi
fi
if [ -n "$save" ] && [ "${zs_rc:-0}" = 0 ]; then
  prev=$(printf '%s/step-%08d' "$save" $((steps - 1)))
  files=$(find "$prev" -type f -size +1M | sort)
  t0=$(date +%s.%N)
  for f in $files; do dd if="$f" of=/dev/null bs=16M status=none; done
  echo "dd of $prev's files (read back; the page cache may hold them): $(du -sb "$prev" | awk '{printf "%.2f GB", $1 / 1e9}') in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
  echo "== resumed from $prev, to step $steps"
  mpirun "${root[@]}" --oversubscribe --bind-to none -np 2 "${train[@]}" --resume-from "$prev" \
    > "$work/r.txt" 2>&1 || { grep -E 'error|signal|Killed' "$work/r.txt" | head -3; exit 1; }
  grep -E '^(resumed|resume:|start-up|step|process peak|param_hash)' "$work/r.txt"
  a=$(grep -oE 'param_hash: [0-9a-f]+' "$work/z.txt") b=$(grep -oE 'param_hash: [0-9a-f]+' "$work/r.txt")
  [ "$a" = "$b" ] && echo "resume: bitwise (${a#param_hash: })" || echo "resume: DIFFERS (${a#param_hash: } vs ${b#param_hash: })"
fi
if [ -n "$tpy" ]; then
  for ac in none bf16; do
    echo "== PyTorch, one process, autocast $ac, limit ${limit_gb} GB (prlimit --data)"
    prlimit --data=$((limit_gb * 1000000000)) "$tpy" bench/torch_full_ft.py --layers "$layers" \
      --context 512 --batch 2 --steps "$steps" --autocast "$ac" --threads "$(nproc)" 2>&1 |
      grep -E '^(step|RESULT)' || echo "(no output: killed?)"
  done
  echo "== PyTorch FSDP2, 2 ranks x 1 thread (torchrun, gloo), fp32, limit ${fsdp_gb} GB per rank (prlimit --data)"
  prlimit --data="$(awk -v g="$fsdp_gb" 'BEGIN { printf "%d", g * 1e9 }')" "$tpy" -m torch.distributed.run --nproc_per_node 2 \
    --master_port $((29500 + RANDOM % 400)) bench/torch_full_ft.py --fsdp2 --layers "$layers" \
    --context 512 --batch 1 --steps "$steps" --threads 1 2>&1 |
    grep -E '^(step|RESULT)' || echo "(no output: killed?)"
fi
