#!/usr/bin/env bash
# scripts/tokenize_shards.py end to end (issue 27):
#   tokenize_test.sh SYSTEM_PYTHON VENV ZS_TRAIN CORPUS WORKDIR MPIEXEC [FLAGS...]
# Makes (once) a venv with the pinned Hugging Face tokenizers from PyPI, trains a BPE of 512 tokens
# on the corpus into shards (uint16, a val shard), re-encodes with the saved tokenizer.json to the
# same bytes, trains zs_train 2 ranks on the shards with --vocab 512, and checks that --vocab 256
# refuses them. Exits 77 (skipped) with the reason where no venv can be made or PyPI is
# unreachable.
set -uo pipefail
sys_py=$1 venv=$2 bin=$3 corpus=$4 work=$5
shift 5
mpi=("$@")
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../scripts/tokenize_shards.py"
pin=tokenizers==0.23.3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"

py=$venv/bin/python
if [ "$("$py" -c 'import tokenizers; print(tokenizers.__version__)' 2>/dev/null)" != "${pin#*==}" ]; then
  rm -rf "$venv"
  "$sys_py" -m venv "$venv" > /dev/null 2>&1 ||
    { echo "SKIP: cannot create a venv with $sys_py (apt-get install python3-venv)"; exit 77; }
  "$py" -m pip install -q --disable-pip-version-check --default-timeout=30 "$pin" ||
    { echo "SKIP: cannot install $pin from PyPI (no network?); tokenize_shards.py was not run"; exit 77; }
fi

"$py" "$script" --out-dir "$work/bpe" --vocab-size 512 --shard-tokens 40000 "$corpus" \
  > "$work/t.txt" 2>&1 || { cat "$work/t.txt"; fail "tokenize_shards.py --vocab-size 512"; }
cat "$work/t.txt"
grep -qF "vocabulary 512: train with --vocab 512" "$work/t.txt" || fail "no vocabulary line"
[ -f "$work/bpe/train_000001.bin" ] && [ -f "$work/bpe/val_000000.bin" ] || fail "missing shards"
magic=$(od -An -t d4 -N 8 "$work/bpe/train_000000.bin" | awk '{print $1, $2}')
[ "$magic" = "20240520 1" ] || fail "header '$magic', expected magic 20240520 (uint16), version 1"
"$py" "$script" --out-dir "$work/again" --tokenizer "$work/bpe/tokenizer.json" --shard-tokens 40000 \
  "$corpus" > /dev/null || fail "tokenize_shards.py --tokenizer"
for f in "$work"/bpe/*.bin; do
  cmp -s "$f" "$work/again/$(basename "$f")" || fail "$(basename "$f") differs with --tokenizer"
done
echo "--tokenizer tokenizer.json: the same shards"

shards=(--train-shards "$work/bpe/train_*.bin" --val-shards "$work/bpe/val_000000.bin")
tiny=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --steps 3 --warmup 1 --eval-every 0
      --eval-batches 1 --sample-tokens 4 --threads 1)
"${mpi[@]}" -np 2 "$bin" "${tiny[@]}" "${shards[@]}" --vocab 512 > "$work/run.txt" 2>&1 ||
  { cat "$work/run.txt"; fail "zs_train on tokenize_shards.py's shards"; }
grep -E '^step +3/3 \| loss|^sample tokens:|^param_hash:' "$work/run.txt" | grep -c . | grep -qx 3 ||
  { cat "$work/run.txt"; fail "no loss, sample or param_hash line"; }
grep -E '^step +3/3|^param_hash:' "$work/run.txt"
if "${mpi[@]}" -np 2 "$bin" "${tiny[@]}" "${shards[@]}" > "$work/v.txt" 2>&1; then
  fail "--vocab 256 (the default) took tokens up to 511"
fi
grep -qE "is not below the model's vocabulary \(--vocab 256\)" "$work/v.txt" ||
  { cat "$work/v.txt"; fail "no vocabulary refusal"; }
echo "--vocab 256 refused: $(grep -m1 'zs_train: error' "$work/v.txt")"
echo PASS
