#!/usr/bin/env bash
# bench_llama: tokens/s of zeroshard's trainer on a Llama-shaped model beside PyTorch on the same
# shape, batch and threads (bench/torch_llama_cpu.py, every configuration of it), bench_gemm's
# bf16 GEMM peak measured in the same run, and the model FLOP/s as a share of that peak.
#
#   bash bench/bench_llama.sh [--steps N] [--dtypes "bf16 fp32"] [--ranks "1 2"] [--no-torch]
#                             [--no-compile] [--dist-sdpa]
#
# Model (issue 27's speed shape): Llama family, 4 layers, width 256, 8 heads, 2 key/value heads,
# SwiGLU width 688, context 128, vocabulary 256, 8 sequences per rank, no biases, untied head.
# zeroshard: 1 process x 2 threads at stage 0, 2 ranks x 1 thread at ZeRO-3, each --dtype (bf16:
# bf16 parameters and matrix inputs, fp32 accumulation and master; fp32). Its figure is the
# slowest rank's median step after the first (the trainer's final JSON record).
# torch (each Python in ZS_TORCH_PYTHONS that imports torch; default ../torch2-venv/bin/python,
# i.e. /work/torch2-venv beside the checkout, when it exists, else Debian's /usr/bin/python3):
# one process x 2 threads in fp32 and bf16 autocast, each with eager attention (matmul + masked softmax) and SDPA, each eager and
# torch.compile'd (--no-compile: eager only); DDP (gloo) and FSDP2 (fully_shard, CPU gloo mesh,
# param dtype = the precision, fp32 reduce) at 2 ranks x 1 thread in fp32 and bf16 autocast,
# eager attention (--dist-sdpa: SDPA). Its figure is the slowest rank's median after its warm-up
# (a quarter of the steps, at least 3: the compiled runs compile in their first steps).
# AdamW(fused=True) on torch 2.x, foreach on 1.x; tcmalloc preloaded for torch (its best here).
#
# The table: configuration, ranks x threads, step ms, tokens/s, "ours/this" (zeroshard's best
# tokens/s at the same ranks divided by the row's: the speed-up, >1 where zeroshard is faster),
# model GFLOP/s and its share of the bf16 peak. Model FLOPs per token are counted as the
# trainer's report does: 6 N (N the row's parameter count) + 12 L T C attention; zeroshard's
# rows take the trainer's own model_tflops. The peak is the best bf16 GFLOP/s over bench_gemm's
# shapes at 2 threads (the whole machine: both rows' ranks x threads = 2 cores); the best at
# the model's own shapes (all but the 2048^3 square) is printed beside it.
#
# The trainer: $ZS_BUILD_DIR/bin/zs_train (ZS_BUILD_DIR defaults to build). If it lacks --family
# (before the model-family flags), zeroshard's rows fall back to the GPT-2 family at the same
# layers, width, heads, context, vocabulary and batch, and the table says so: those rows then
# compare a different model with the Llama peer.
# The same ISA caps as bench_step.sh apply (ZS_MAX_ISA, ONEDNN_MAX_CPU_ISA, ... pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=30; dtypes="bf16 fp32"; ranks="1 2"; torch=1; compile=1; dist_sdpa=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --no-compile) compile=0; shift ;;
    --dist-sdpa) dist_sdpa=1; shift ;;
    *) echo "bench_llama: unknown option $1" >&2; exit 2 ;;
  esac
done
build=${ZS_BUILD_DIR:-build}
bin=$build/bin/zs_train
gemm=$build/bench/bench_gemm
for f in "$bin" "$gemm"; do
  [ -x "$f" ] || { echo "bench_llama: $f not built (ninja -C $build zs_train bench_gemm)" >&2; exit 2; }
done
default_py=/usr/bin/python3
[ -x ../torch2-venv/bin/python ] && default_py=../torch2-venv/bin/python
pythons=${ZS_TORCH_PYTHONS:-$default_py}
peer=bench/torch_llama_cpu.py
L=4 C=256 H=8 KV=2 F=688 T=128 V=256 B=8
family=llama
shape=(--family llama --layers $L --width $C --heads $H --kv-heads $KV --ffn $F --context $T
       --vocab $V --batch $B)
help=$("$bin" --help 2>&1 || true)  # not piped into grep -q: pipefail would see SIGPIPE
if ! grep -q -- '--family' <<< "$help"; then
  family=gpt2
  shape=(--layers $L --width $C --heads $H --context $T --vocab $V --batch $B)
fi
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base=$tmp
rows=$tmp/rows.tsv  # label, ranks, threads, step_ms, tok_s, model_gflops (or ""), params, note
: > "$rows"

# bench_gemm at 2 threads: the best bf16 rate over all shapes and over the model's shapes.
"$gemm" 2 > "$tmp/gemm.txt"
read -r peak shape_peak fp32_peak < <(awk '/^threads/ || /^shape/ {next} NF {v=$NF; if (v>all) all=v;
  if ($1 != "square" && v>m) m=v; if ($(NF-1)>f) f=$(NF-1)} END {print all+0, m+0, f+0}' "$tmp/gemm.txt")

for np in $ranks; do
  threads=$((2 / np)); [ "$threads" -lt 1 ] && threads=1
  stage=0; [ "$np" -gt 1 ] && stage=3
  for dtype in $dtypes; do
    log=$tmp/zs_${np}_${dtype}.jsonl
    label="zeroshard $family ZeRO-$stage $dtype"
    if ! mpirun "${flags[@]}" -np "$np" "$bin" "${shape[@]}" --threads "$threads" \
        --zero-stage "$stage" --dtype "$dtype" --steps "$steps" --eval-every 0 --eval-batches 1 \
        --sample-tokens 0 --log-every 1000 --json-log "$log" > "$tmp/out" 2>&1; then
      printf '%s\t%s\t%s\t\t\t\t\tfailed: %s\n' "$label" "$np" "$threads" \
        "$(grep -m1 -i error "$tmp/out" | cut -c1-70)" >> "$rows"
      continue
    fi
    python3 - "$log" "$label" "$np" "$threads" >> "$rows" <<'PY'
import json, sys
f = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f'{f["median_step_ms"]:.1f}',
                 f'{f["median_tokens_per_s"]:.2f}', f'{1e3 * f["model_tflops"]:.6f}', str(f["params"]), ""]))
PY
  done
done

run_torch() {  # python label ranks args...
  local py=$1 label=$2 np=$3; shift 3
  local threads=$((2 / np)); [ "$threads" -lt 1 ] && threads=1
  rm -f "$tmp/torch.jsonl"
  timeout "${ZS_PEER_TIMEOUT:-600}" "$py" "$peer" --n_layer $L --n_embd $C --n_head $H --n_kv_head $KV \
    --ffn $F --seq_len $T --vocab $V --batch $B --steps "$steps" --warmup "$warmup" \
    --threads "$threads" --world "$np" --port $((29700 + RANDOM % 200)) "${opt[@]}" "$@" \
    --json "$tmp/torch.jsonl" > "$tmp/tout" 2>&1 || true
  if [ ! -s "$tmp/torch.jsonl" ]; then
    local why; why=$(grep -E 'UNSUPPORTED|Error:' "$tmp/tout" | tail -1 | cut -c1-90)
    printf '%s\t%s\t%s\t\t\t\t\tfailed: %s\n' "$label" "$np" "$threads" "${why:-no result}" >> "$rows"
    return
  fi
  python3 - "$tmp/torch.jsonl" "$label" "$np" "$threads" "$L" "$T" "$C" >> "$rows" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
L, T, C = (int(x) for x in sys.argv[5:8])
gflops = (6 * r["params"] + 12 * L * T * C) * r["tokens_per_s"] / 1e9
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f'{r["median_step_ms"]:.1f}',
                 f'{r["tokens_per_s"]:.1f}', f"{gflops:.4f}", str(r["params"]), ""]))
PY
}

if [ "$torch" = 1 ]; then
  export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
  [ -f "$LD_PRELOAD" ] || unset LD_PRELOAD
  warmup=$((steps / 4)); [ "$warmup" -lt 3 ] && warmup=3
  [ "$warmup" -ge "$steps" ] && warmup=$((steps - 1))
  for py in $pythons; do
    version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || continue
    opt=(--foreach); case "$version" in 1.*) ;; *) opt=(--fused) ;; esac
    for np in $ranks; do
      for dtype in $dtypes; do
        autocast=none; [ "$dtype" = bf16 ] && autocast=bf16
        if [ "$np" = 1 ]; then
          comps=(eager); [ "$compile" = 1 ] && comps+=(compile)
          for comp in "${comps[@]}"; do
            for attn in eager sdpa; do
              extra=(); [ "$attn" = sdpa ] && extra+=(--sdpa); [ "$comp" = compile ] && extra+=(--compile)
              case "$version" in 1.*) [ ${#extra[@]} -gt 0 ] && continue ;; esac  # 2.0+ only
              label="torch $version single $dtype attn=$attn${comp/eager/}"
              run_torch "$py" "${label/compile/ compile}" 1 --mode single --autocast "$autocast" "${extra[@]}"
            done
          done
        else
          attn=(); [ "$dist_sdpa" = 1 ] && attn=(--sdpa)
          run_torch "$py" "torch $version ddp $dtype" "$np" --mode ddp --autocast "$autocast" "${attn[@]}"
          run_torch "$py" "torch $version fsdp2 $dtype" "$np" --mode fsdp2 --autocast "$autocast" \
            --fsdp2_param_dtype "$dtype" "${attn[@]}"
        fi
      done
    done
  done
fi

malloc=glibc; [ -n "${LD_PRELOAD:-}" ] && malloc="tcmalloc ($LD_PRELOAD)"
python3 - "$rows" "$peak" "$shape_peak" "$family" "$malloc" $L $T $C "$fp32_peak" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
peak, shape_peak, family = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
L, T, C = (int(x) for x in sys.argv[6:9])
fp32_peak = float(sys.argv[9])
print(f"torch's allocator: {sys.argv[5]}")
best = {}
for r in rows:
    if r[0].startswith("zeroshard") and r[4]:
        best[r[1]] = max(best.get(r[1], 0.0), float(r[4]))
print(f"bench_gemm bf16, 2 threads: peak {peak:.1f} GFLOP/s (best over its shapes), "
      f"{shape_peak:.1f} at the model's shapes; fp32 best {fp32_peak:.1f}")
if fp32_peak > peak:
    print("NOTE: bf16 GEMMs run slower than fp32 here (no native bf16 on this CPU?): the bf16 peak "
          "is not the machine's, shares above 100% follow")
if family != "llama":
    print("NOTE: the trainer lacks --family: zeroshard rows are the GPT-2 family (LayerNorm, learned "
          "positions, GELU, biases), the torch rows Llama: not the same model")
params = sorted({(r[0].split()[0], r[6]) for r in rows if r[6]})
print("parameters: " + ", ".join(f"{who} {n}" for who, n in params) + "; FLOPs/token 6N + 12LTC: " +
      ", ".join(f"{who} {6 * int(n) + 12 * L * T * C}" for who, n in params))
zs = [r for r in rows if r[0].startswith("zeroshard") and r[4]]
if zs:  # the trainer's own count, for comparison with the line above
    print(f"FLOPs/token by the trainer's report: {1e9 * float(zs[0][5]) / float(zs[0][4]):.0f}")
print(f'{"configuration":<46} {"ranks x thr":>11} {"step_ms":>8} {"tok_s":>8} {"ours/this":>9} '
      f'{"model_GF/s":>10} {"%_bf16_peak":>11}')
for label, np, thr, ms, tok, gf, _, note in rows:
    if not tok:
        print(f"{label:<46} {np + ' x ' + thr:>11} {note}")
        continue
    ratio = f"{best[np] / float(tok):.2f}" if np in best else "-"
    share = f"{100 * float(gf) / peak:.1f}" if peak > 0 else "-"
    print(f"{label:<46} {np + ' x ' + thr:>11} {float(ms):>8.1f} {float(tok):>8.0f} {ratio:>9} "
          f"{float(gf):>10.1f} {share:>11}")
PY
