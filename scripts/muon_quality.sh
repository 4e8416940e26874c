#!/usr/bin/env bash
# Training quality of Muon (docs/optimizers.md, "Muon", "Training quality"):
#   scripts/muon_quality.sh [--build DIR] [--out DIR] [--steps N] [--llama-steps N]
#                           [--lrs "1e-3 2e-3 4e-3"] [--models "default llama"]
#                           [--optimizers "adamw muon"] [--np N] [--shards DIR] [--tok-python PY]
#                           [--python PY] [--quick]
#                           [-- extra zs_train flags]
# AdamW against Muon + AdamW (--optimizer muon: Muon for the blocks' 2-D matrices, AdamW for the
# rest), each at every learning rate of --lrs (the same grid for both, and the same schedule,
# warm-up, weight decay, seed and data), at --np ranks (2), ZeRO-3, bf16 compute, on two models:
#   default  the README's main job: the default zs_train run (GPT-2 family, 4 layers, width 128,
#            bytes of the shipped license texts), --steps steps (600, its default), validated
#            every steps/20 steps;
#   llama    docs/models.md's Llama-shaped token run: 6 layers, width 384, 6 heads over 2 KV
#            heads, FFN 1024, context 256, 4 sequences per rank, on BPE token shards of the
#            shipped corpus (scripts/tokenize_shards.py --vocab-size 8192 data/corpus.txt: the
#            BPE stops at 6,229 tokens, 44,794 training and 4,977 validation tokens),
#            --llama-steps steps (60), warm-up steps/10, validated every steps/12 steps.
# The shards are made once into --shards (default OUT/shards) with --tok-python, a Python with
# Hugging Face tokenizers (default: the first of BUILD/tokenize-pyenv/bin/python, the venv of the
# ctest tokenize_shards, and /usr/bin/python3 that imports it); an existing DIR/train_000000.bin
# is used as it is, with the vocabulary of DIR/tokenizer.json.
# Logs: OUT/MODEL-OPTIMIZER-lrLR.{txt,jsonl}; an existing .jsonl with a final record is kept
# (delete it to run again), so the runs may be made over several invocations. The runs are made
# one after another (each mpirun with its own Open MPI session directory). --optimizers adamw (or
# muon) runs only those: more rates for one optimizer, into the OUT of the others' logs. Then
# scripts/muon_report.py writes OUT/table.md (per model: each optimizer's final validation loss at
# every learning rate; at each optimizer's best, the validation loss at a quarter, half,
# three quarters and all of the steps, the lowest and its step, and the first validated step whose
# loss is at or below AdamW's best final loss) and OUT/muon_quality.png (validation loss per step,
# both models).
# Validation leaves the training's bits alone, and the losses are deterministic: one run each.
# --quick: a tiny model and 10 steps for every run (a smoke run; ctest muon_quality_smoke runs it
# with --models default). PY (--python) draws the figure: Debian's /usr/bin/python3 with its
# python3-matplotlib. Exit 77 when PY has no matplotlib (the table is written), 2 on bad
# arguments or missing shards, 1 on a failed run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build out=$here/muon-quality steps=600 llama_steps=60 np=2
lrs="1e-3 2e-3 4e-3" models="default llama" optimizers="adamw muon" shards="" tok_python=""
python=/usr/bin/python3
default_shape=() llama_shape=(--layers 6 --width 384 --heads 6 --kv-heads 2 --ffn 1024 --context 256
                               --batch 4)
quick=() extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --llama-steps) llama_steps=$2; shift 2 ;;
    --lrs) lrs=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --optimizers) optimizers=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --tok-python) tok_python=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --quick)
      steps=10 llama_steps=10
      default_shape=(--layers 2 --heads 2 --width 64 --context 32 --batch 4)
      llama_shape=(--layers 2 --heads 2 --kv-heads 1 --width 64 --ffn 128 --context 32 --batch 4)
      quick=(--eval-batches 1)
      shift ;;
    --) shift; extra+=("$@"); break ;;
    *) echo "muon_quality.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=$build/bin/zs_train
[ -x "$bin" ] || { echo "muon_quality.sh: no $bin (build first: scripts/run.sh build)" >&2; exit 2; }
for m in $models; do
  case $m in
    default | llama) ;;
    *) echo "muon_quality.sh: unknown model '$m' (default llama)" >&2; exit 2 ;;
  esac
done
for o in $optimizers; do
  case $o in
    adamw | muon) ;;
    *) echo "muon_quality.sh: unknown optimizer '$o' (adamw muon)" >&2; exit 2 ;;
  esac
done
[ -n "$lrs" ] && [ -n "$models" ] && [ -n "$optimizers" ] ||
  { echo "muon_quality.sh: --lrs, --models or --optimizers is empty" >&2; exit 2; }
source "$here/scripts/compare_lib.sh"
compare_mpirun "$np"
mkdir -p "$out"
# Each mpirun's own Open MPI session directory (short: it holds Unix sockets), removed at the end.
sessions=$(mktemp -d /tmp/zs-muonq.XXXXXX)
trap 'rm -rf "$sessions"' EXIT

# llama_shards: sets `shard_flags` to the Llama run's data flags, making the shards first.
llama_shards() {
  local dir=${shards:-$out/shards} py vocab
  if [ ! -f "$dir/train_000000.bin" ]; then
    if [ -z "$tok_python" ]; then
      for py in "$build/tokenize-pyenv/bin/python" /usr/bin/python3; do
        if "$py" -c 'import tokenizers' 2>/dev/null; then tok_python=$py; break; fi
      done
    fi
    [ -n "$tok_python" ] || {
      echo "muon_quality.sh: no Python with Hugging Face tokenizers to make the Llama run's shards:" \
        "give --tok-python PY (e.g. a venv with pip install tokenizers) or --shards DIR" >&2
      exit 2
    }
    echo "== shards: $tok_python scripts/tokenize_shards.py --vocab-size 8192 data/corpus.txt"
    "$tok_python" "$here/scripts/tokenize_shards.py" --out-dir "$dir" --vocab-size 8192 \
      "$here/data/corpus.txt" | tee "$out/shards.txt"
  fi
  [ -f "$dir/tokenizer.json" ] && [ -f "$dir/val_000000.bin" ] ||
    { echo "muon_quality.sh: $dir has no tokenizer.json or val_000000.bin" >&2; exit 2; }
  vocab=$("$python" -c 'import json, sys
t = json.load(open(sys.argv[1]))
print(1 + max(list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens") or []]))' \
    "$dir/tokenizer.json")
  shard_flags=(--train-shards "$dir/train_*.bin" --val-shards "$dir/val_000000.bin" --vocab "$vocab")
}

# run MODEL OPTIMIZER LR FLAGS...: one run, logs OUT/MODEL-OPTIMIZER-lrLR.{txt,jsonl}, kept when
# its log has a final record.
run() {
  local model=$1 opt=$2 lr=$3 name
  shift 3
  name=$model-$opt-lr$lr
  if grep -q '"final"' "$out/$name.jsonl" 2>/dev/null; then
    echo "== $name: kept $out/$name.jsonl (delete it to run again)"
    return 0
  fi
  echo "== $name"
  rm -f "$out/$name.jsonl"
  OMPI_MCA_orte_tmpdir_base=$(mktemp -d -p "$sessions") compare_run "$out/$name.txt" "$bin" \
    --zero-stage 3 --dtype bf16 --sample-tokens 0 "$@" --optimizer "$opt" --lr "$lr" \
    "${quick[@]}" "${extra[@]}" --json-log "$out/$name.jsonl"
}

for m in $models; do
  case $m in
    default) flags=("${default_shape[@]}" --steps "$steps" --eval-every $(((steps + 19) / 20))) ;;
    llama)
      llama_shards
      flags=(--family llama "${llama_shape[@]}" "${shard_flags[@]}" --steps "$llama_steps"
             --warmup $(((llama_steps + 9) / 10)) --eval-every $(((llama_steps + 11) / 12))) ;;
  esac
  for opt in $optimizers; do
    for lr in $lrs; do run "$m" "$opt" "$lr" "${flags[@]}"; done
  done
done

# shellcheck disable=SC2086
"$python" "$here/scripts/muon_report.py" "$out" --models $models --lrs $lrs
