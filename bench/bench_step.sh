#!/usr/bin/env bash
# bench_step: per-stage step time, tokens/s and peak memory per rank of zs_train on one fixed
# model at 1 and 2 ranks, and PyTorch on the same model, batch and threads, side by side.
#
#   bash bench/bench_step.sh [--steps N] [--dtype bf16|fp32] [--ranks "1 2"] [--no-torch]
#                               [--peer-dtype bf16|fp32]
#
# --peer-dtype: the peer's precision (default: --dtype). The fair peer is the strongest one on the
# machine: fp32 on AVX2-only CPUs (torch's bf16 kernels crawl there), bf16 autocast on AVX-512
# BF16 ones. To measure the AVX2 path on an AVX-512 machine, cap both sides: ZS_MAX_ISA=avx2
# ONEDNN_MAX_CPU_ISA=AVX2 for zeroshard, and the same plus MKL_ENABLE_INSTRUCTIONS=AVX2
# ATEN_CPU_CAPABILITY=avx2 for torch (the script passes the environment through).
#
# Model: 4 layers, width 256, 4 heads, context 128, vocabulary 256, 8 sequences per rank
# (the PEERS.md shape). Threads: 2 per process at 1 rank, 1 per rank at 2 ranks (2 cores).
# Times are medians over steps after the first (zs_train's final JSON object, slowest rank) and
# the peer script's medians after its warm-up (slowest rank). zeroshard's memory column is the
# tracked peak per rank (model states, activations, buffers); torch's is its process RSS. PyTorch runs with tcmalloc preloaded (its best
# configuration here) and OpenBLAS; the peer script lives in ../shared/peers/ (ZS_PEERS).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=40; dtype=bf16; ranks="1 2"; torch=1; peer_dtype=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --peer-dtype) peer_dtype=$2; shift 2 ;;
    *) echo "bench_step: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=${ZS_BUILD_DIR:-build}/bin/zs_train
peers=${ZS_PEERS:-../shared/peers}
shape=(--layers 4 --heads 4 --width 256 --context 128 --batch 8)
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%-34s %6s %10s %10s %12s %14s\n' impl ranks step_ms tok_s peak_MiB comm_MiB/step
for np in $ranks; do
  for stage in 0 1 2 3; do
    log=$tmp/zs_${np}_${stage}.jsonl
    mpirun "${flags[@]}" -np "$np" "$bin" "${shape[@]}" --zero-stage "$stage" --dtype "$dtype" \
      --steps "$steps" --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1000 \
      --json-log "$log" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
    python3 - "$log" "zeroshard ZeRO-$stage $dtype" "$np" <<'PY'
import json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
print(f'{sys.argv[2]:<34} {sys.argv[3]:>6} {final["median_step_ms"]:>10.1f} {final["median_tokens_per_s"]:>10.0f} '
      f'{final["memory_bytes"]["total"]/2**20:>12.1f} {final["comm_bytes_per_step"]/2**20:>14.2f}')
PY
  done
done

# Each Python in ZS_TORCH_PYTHONS (default: Debian's /usr/bin/python3) that imports torch runs
# the peer; e.g. ZS_TORCH_PYTHONS="/usr/bin/python3 /path/to/venv/bin/python" adds a PyPI torch 2.x.
if [ "$torch" = 1 ] && [ -f "$peers/torch_gpt_cpu.py" ]; then
  export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
  [ -f "$LD_PRELOAD" ] || unset LD_PRELOAD
  autocast=none; [ "${peer_dtype:-$dtype}" = bf16 ] && autocast=bf16
  common=(--n_layer 4 --n_head 4 --n_embd 256 --vocab 256 --seq_len 128 --batch 8 --steps "$steps" --foreach)
  for py in ${ZS_TORCH_PYTHONS:-/usr/bin/python3}; do
    version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || continue
    run_torch() {  # label ranks args...
      local label=$1 np=$2; shift 2
      rm -f "$tmp/torch.jsonl"
      if ! "$py" "$peers/torch_gpt_cpu.py" "${common[@]}" "$@" --json "$tmp/torch.jsonl" > "$tmp/tout" 2>&1 ||
         [ ! -s "$tmp/torch.jsonl" ]; then
        printf '%-34s %6s %s\n' "$label" "$np" "failed: $(grep -m1 -E 'Error|error' "$tmp/tout" | cut -c1-60)"
        return
      fi
      python3 - "$tmp/torch.jsonl" "$label" "$np" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
mem = max(r["peak_rss_mib_per_rank"])  # whole-process RSS, not only model state
print(f'{sys.argv[2]:<34} {sys.argv[3]:>6} {r["median_step_ms"]:>10.1f} {r["tokens_per_s"]:>10.0f} {mem:>12.1f} {"":>14}')
PY
    }
    for np in $ranks; do
      if [ "$np" = 1 ]; then
        run_torch "torch $version single ${peer_dtype:-$dtype}" 1 --mode single --threads 2 --autocast "$autocast"
      else
        for mode in ddp zero1 fsdp2; do
          extra=(); [ "$mode" = fsdp2 ] && extra=(--fsdp2_param_dtype "${peer_dtype:-$dtype}")
          run_torch "torch $version $mode ${peer_dtype:-$dtype}" "$np" --mode "$mode" --world "$np" --autocast "$autocast" "${extra[@]}"
        done
      fi
    done
  done
fi
