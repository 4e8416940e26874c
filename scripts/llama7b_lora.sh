#!/usr/bin/env bash
# The LLaMA-7B LoRA fine-tune on one machine, end to end, and its table (docs/benchmarks/real-size.md): LoRA
# r=8 over an int8 base, ZeRO-3, 2 ranks, context 256, activation checkpointing, token shards.
#   A  random init, --steps-a steps (default 5): time to the first step, seconds per step,
#      tokens/s, the losses, every rank's VmHWM beside zs_plan's per-rank total for the same flags
#   B  from a synthetic sharded bf16 Hugging Face directory (scripts/hf_synth_llama.py, written
#      once and reused): the import's time, 3 steps saving at step 2 (the uninterrupted run)
#   C  the run of B again, killed with kill -9 during step 3 after its step-2 save, then resumed:
#      its param_hash must equal B's; save and resume GB/s beside dd of the checkpoint's files;
#      the resumed run writes its adapters (--export-adapters)
#   D  PEFT loads those adapters over the Hugging Face directory (logits finite, and not the
#      base's: the adapters act)
#   E  the PyTorch peer on the same directory and tokens: transformers + PEFT LoRA, bf16 weights,
#      gradient checkpointing, one process (bench/torch_peft_lora.py): peak RSS and tokens/s
# usage: bash scripts/llama7b_lora.sh [--shape 7b|tiny] [--work DIR] [--steps-a N] [--keep]
#   --shape tiny: 2 layers, width 256 (a check of the script itself, a minute)
# Environment: ZS_BUILD_DIR (default build), ZS_NP (ranks, default 2), ZS_PYTHON (python3 with
# numpy, default /usr/bin/python3), ZS_TORCH_PYTHON (python with torch >= 2, transformers and peft;
# unset or unusable: D and E are skipped and the table says so). Needs ~12 GB of memory and twice
# the model's bf16 size on disk at 7B (the directory, the checkpoints); run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shape=7b work="" steps_a=5 keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --steps-a) steps_a=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "llama7b_lora: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $shape in
  # layers width heads kv_heads ffn vocab
  7b) dims=(32 4096 32 32 11008 32000) ;;
  tiny) dims=(2 256 4 4 688 32000) ;;
  *) echo "llama7b_lora: --shape $shape is not one of 7b, tiny" >&2; exit 2 ;;
esac
build=${ZS_BUILD_DIR:-build}
bin=$build/bin/zs_train plan=$build/bin/zs_plan
np=${ZS_NP:-2}
py=${ZS_PYTHON:-/usr/bin/python3}
tpy=${ZS_TORCH_PYTHON:-}
work=${work:-/tmp/zs-llama7b-lora-$shape}
for f in "$bin" "$plan"; do [ -x "$f" ] || { echo "llama7b_lora: no $f (build first)" >&2; exit 1; }; done
mkdir -p "$work"
[ $keep = 1 ] || trap 'rm -rf "$work/b" "$work/c"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "llama7b_lora: $cpu, $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); shape $shape; work $work"

mpi=(mpirun --oversubscribe --bind-to none -np "$np")
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
model=(--family llama --layers "${dims[0]}" --width "${dims[1]}" --heads "${dims[2]}"
       --kv-heads "${dims[3]}" --ffn "${dims[4]}" --vocab "${dims[5]}")
# What zs_plan plans too, then the training's own flags.
mem=(--context 256 --batch 1 --lora-rank 8 --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
     --base-dtype int8 --zero-stage 3
     --checkpoint-activations --threads 1)
run=("${mem[@]}" --lr 1e-3 --warmup 1 --eval-every 0 --eval-batches 1 --sample-tokens 0)

# Token shards (llm.c's format) from the shipped text, one token per byte.
if [ ! -f "$work/train.bin" ]; then
  "$py" - "$root/data/corpus.txt" "$work" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
def shard(path, toks):
    open(path, "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) +
                          struct.pack("<%dH" % len(toks), *toks))
cut = len(data) * 9 // 10
shard(sys.argv[2] + "/train.bin", list(data[:cut]))
shard(sys.argv[2] + "/val.bin", list(data[cut:]))
PY
fi
data=(--train-shards "$work/train.bin" --val-shards "$work/val.bin")

# secs FILE: the wall seconds zs_train says it took to start ("start-up: T s since launch").
startup_of() { grep -oE '^start-up: [0-9.]+' "$1" | awk '{print $2}'; }
hash_of() { grep -oE 'param_hash: [0-9a-f]+' "$1" | awk '{print $2}'; }
final_of() {  # final_of LOG KEY: a field of --json-log's final record
  "$py" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print(json.dumps(r[sys.argv[2]]))' "$1" "$2"
}
losses_of() {
  "$py" -c 'import json,sys; print(" ".join("%.3f" % json.loads(l)["loss"] for l in open(sys.argv[1]) if json.loads(l).get("type") == "step"))' "$1"
}
gib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1073741824 }'; }

plan_bytes=$("$plan" "${model[@]}" "${mem[@]}" --ranks "$np" --json |
             "$py" -c 'import json,sys; print(json.load(sys.stdin)["device_total_bytes"])')
echo "zs_plan: $(gib "$plan_bytes") GiB per rank"

# --- A: random init.
echo "== A: random init, $steps_a steps"
"${mpi[@]}" "$bin" "${model[@]}" "${run[@]}" "${data[@]}" --steps "$steps_a" \
  --json-log "$work/a.jsonl" --json-log-mode overwrite > "$work/a.txt" 2>&1 ||
  { cat "$work/a.txt"; exit 1; }
grep -E '^(init|start-up|step|process peak)' "$work/a.txt"
a_rss=$(final_of "$work/a.jsonl" peak_rss_bytes_per_rank)
a_ms=$(final_of "$work/a.jsonl" median_step_ms)
a_tok=$(final_of "$work/a.jsonl" median_tokens_per_s)

# --- B: from a sharded bf16 Hugging Face directory.
hf=$work/hf
if [ ! -f "$hf/config.json" ]; then
  echo "== writing the synthetic Hugging Face directory $hf"
  "$py" scripts/hf_synth_llama.py "$hf" "${dims[@]}"
fi
hf_bytes=$(du -sb "$hf" | awk '{print $1}')
ft=("${model[@]}" "${run[@]}" "${data[@]}" --init-from-hf "$hf" --steps 3 --save-every 2)
echo "== B: --init-from-hf, 3 steps, saving at step 2"
rm -rf "$work/b"
"${mpi[@]}" "$bin" "${ft[@]}" --save-dir "$work/b/ck" --json-log "$work/b.jsonl" \
  --json-log-mode overwrite > "$work/b.txt" 2>&1 || { cat "$work/b.txt"; exit 1; }
grep -E '^(init|initial weights|import|start-up|step|saved|process peak)' "$work/b.txt"
b_hash=$(hash_of "$work/b.txt")
b_rss=$(final_of "$work/b.jsonl" peak_rss_bytes_per_rank)

# --- C: killed during step 3, resumed.
echo "== C: the same run, kill -9 during step 3, resumed"
rm -rf "$work/c"
"${mpi[@]}" "$bin" "${ft[@]}" --save-dir "$work/c/ck" > "$work/c1.txt" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null && ! grep -q "saved checkpoint $work/c/ck/step-00000002" "$work/c1.txt"; do
  sleep 0.1
done
pkill -9 -f -- "--save-dir $work/c/ck" || true
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
grep -q "saved checkpoint $work/c/ck/step-00000002" "$work/c1.txt" || { cat "$work/c1.txt"; exit 1; }
! grep -qE '^step +3/' "$work/c1.txt" || echo "llama7b_lora: step 3 finished before the kill (the kill came late)"
save_line=$(grep "saved checkpoint $work/c/ck/step-00000002" "$work/c1.txt")
ck_bytes=$(du -sb "$work/c/ck/step-00000002" | awk '{print $1}')
dd_line=$(find "$work/c/ck/step-00000002" -type f -size +1M -print0 |
          xargs -0 -I{} dd if={} of=/dev/null bs=16M 2>&1 | grep -E 'copied' | tail -1 || true)
"${mpi[@]}" "$bin" "${ft[@]}" --save-dir "$work/c/ck" --resume --export-adapters "$work/c/adapters" \
  > "$work/c2.txt" 2>&1 || { cat "$work/c2.txt"; exit 1; }
grep -E '^(resumed|resume:|step|exported|process peak)' "$work/c2.txt"
c_hash=$(hash_of "$work/c2.txt")
resume_line=$(grep '^resume: read' "$work/c2.txt")
same=no
[ -n "$b_hash" ] && [ "$b_hash" = "$c_hash" ] && same=yes
echo "C: param_hash $c_hash, uninterrupted $b_hash: same=$same"

# --- D and E: PEFT over the directory, and the PyTorch peer.
peft_line="skipped (ZS_TORCH_PYTHON unset)" torch_line="skipped (ZS_TORCH_PYTHON unset)"
if [ -n "$tpy" ] && "$tpy" -c 'import torch, transformers, peft' 2>/dev/null; then
  echo "== D: PEFT loads the adapters over $hf"
  peft_line=$("$tpy" - "$hf" "$work/c/adapters" <<'PY' 2>&1 | tail -1
import sys, torch, transformers, peft
base = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16)
x = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
with torch.no_grad():
    b = base(input_ids=x).logits.float()
    m = peft.PeftModel.from_pretrained(base, sys.argv[2])
    l = m(input_ids=x).logits.float()
ok = bool(torch.isfinite(l).all()) and not torch.equal(l, b)
print("loaded: logits finite, %s the base's (max |diff| %.3g)%s" %
      ("not" if not torch.equal(l, b) else "equal to", (l - b).abs().max().item(), "" if ok else " FAIL"))
PY
)
  echo "D: $peft_line"
  echo "== E: PyTorch + PEFT LoRA on $hf (bf16, gradient checkpointing, one process, $(nproc) threads)"
  "$tpy" bench/torch_peft_lora.py "$hf" --context 256 --batch "$np" --steps 3 --rank 8 --alpha 8 \
    --lr 1e-3 --threads "$(nproc)" --tokens "$work/train.bin" > "$work/e.txt" 2>&1 || true
  cat "$work/e.txt" | grep -E '^(step|RESULT)' || tail -5 "$work/e.txt"
  torch_line=$("$py" - "$work/e.txt" <<'PY'
import json, sys
r = [json.loads(l[7:]) for l in open(sys.argv[1]) if l.startswith("RESULT ")]
if not r:
    print("no result (see e.txt)")
elif "error" in r[0]:
    print("failed: %s; peak RSS %.2f GiB" % (r[0]["error"], r[0]["peak_rss_bytes"] / 2**30))
else:
    r = r[0]
    print("%.2f s/step, %.1f tok/s, peak RSS %.2f GiB, load %.1f s (torch %s, losses %s)" %
          (r["step_s"], r["tokens_per_s"], r["peak_rss_bytes"] / 2**30, r["load_s"], r["torch"],
           " ".join("%.3f" % l for l in r["losses"])))
PY
)
fi

rss_list() { "$py" -c 'import json,sys; print(", ".join("%.2f" % (b / 2**30) for b in json.loads(sys.argv[1])))' "$1"; }
ratio() { "$py" -c 'import json,sys; print("%.2f" % (max(json.loads(sys.argv[1])) / float(sys.argv[2])))' "$1" "$plan_bytes"; }
{
  echo "## LLaMA-7B LoRA on one machine ($shape shape; $cpu, $(nproc) cores; $np ranks)"
  echo
  echo "| | figure |"
  echo "|---|---|"
  echo "| A: start-up (launch to first step) | $(startup_of "$work/a.txt") s |"
  echo "| A: median step, tokens/s | $(awk -v m="$a_ms" 'BEGIN { printf "%.1f s", m / 1000 }'), $(printf '%.2f' "$a_tok") tok/s |"
  echo "| A: losses | $(losses_of "$work/a.jsonl") |"
  echo "| A: VmHWM per rank vs zs_plan | $(rss_list "$a_rss") GiB vs $(gib "$plan_bytes") GiB ($(ratio "$a_rss")x) |"
  echo "| B: HF directory | $(gib "$hf_bytes") GiB bf16, $(ls "$hf" | grep -c 'safetensors$') files |"
  echo "| B: import | $(grep -m1 -oE '^(import|initial weights)[^(]*\(.*' "$work/b.txt" | head -1) |"
  echo "| B: start-up (launch to first step) | $(startup_of "$work/b.txt") s |"
  echo "| B: VmHWM per rank vs zs_plan | $(rss_list "$b_rss") GiB vs $(gib "$plan_bytes") GiB ($(ratio "$b_rss")x) |"
  save_fig=${save_line#*(}
  echo "| C: save at step 2 | ${save_fig%)} (dd of its files: ${dd_line##*, }) |"
  echo "| C: resume | ${resume_line#resume: } |"
  echo "| C: kill -9 during step 3, resumed: param_hash | $c_hash vs $b_hash uninterrupted: same=$same |"
  echo "| D: PEFT over the directory | $peft_line |"
  echo "| E: PyTorch + PEFT, bf16, checkpointing, 1 process | $torch_line |"
} | tee "$work/table.md"
[ "$same" = yes ] || { echo "llama7b_lora: FAIL: the resumed run's param_hash differs" >&2; exit 1; }
