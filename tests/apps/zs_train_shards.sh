#!/usr/bin/env bash
# zs_train on llm.c token shards (issue 27, apps/zs_train/token_shards.h), one case per ctest:
#   zs_train_shards.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# The shards are the shipped corpus's bytes as uint16 tokens (vocabulary 256), two training shards
# matched by a glob and one validation shard, written by /usr/bin/python3 (stdlib only).
# Cases:
#   train    2 ranks train a few steps on --train-shards/--val-shards: loss lines, the sampled token
#            ids and a param_hash; ZeRO stage 0 and stage 3 give the same param_hash
#   refused  a token >= --vocab (named with file and offset), a wrong magic, a pattern matching
#            nothing, --data with --train-shards: one message, non-zero exit, before step 1
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

corpus="$(dirname "$bin")/../share/zeroshard/corpus.txt"
[ -f "$corpus" ] || fail "no corpus at $corpus"

# shard FILE MAGIC FIRST LAST [BAD_AT]: bytes [FIRST, LAST) of the corpus as uint16 tokens in a
# shard with MAGIC; with BAD_AT, the token at that offset is 300 (outside vocabulary 256).
shard() {
  /usr/bin/python3 - "$corpus" "$@" <<'PY'
import struct, sys
corpus, out, magic, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tokens = list(open(corpus, "rb").read()[first:last])
if len(sys.argv) > 6:
    tokens[int(sys.argv[6])] = 300
header = struct.pack("<256i", magic, 1, len(tokens), *([0] * 253))
open(out, "wb").write(header + struct.pack("<%dH" % len(tokens), *tokens))
PY
}

shard "$work/train_000.bin" 20240520 0 20000 || fail "python3 could not write a shard"
shard "$work/train_001.bin" 20240520 20000 40000
shard "$work/val.bin" 20240520 40000 44000
shards=(--train-shards "$work/train_*.bin" --val-shards "$work/val.bin")

case "$case_name" in
  train)
    run_ok "$work/s3.txt" 2 "${tiny[@]}" "${shards[@]}" --steps 4 --zero-stage 3
    grep -E '^step +4/4 \| loss [0-9.]+' "$work/s3.txt" || { cat "$work/s3.txt"; fail "no loss line"; }
    grep -qE "data $work/train_\*\.bin \(validation $work/val.bin\) \(40000 train / 4000 val tokens\)" \
      "$work/s3.txt" || { cat "$work/s3.txt"; fail "the banner does not name the shards"; }
    grep -E '^sample tokens: [0-9]+( [0-9]+){8}$' "$work/s3.txt" ||
      { cat "$work/s3.txt"; fail "no 'sample tokens:' line of 9 ids"; }
    [ -n "$(hash_of "$work/s3.txt")" ] || fail "no param_hash"
    run_ok "$work/s0.txt" 2 "${tiny[@]}" "${shards[@]}" --steps 4 --zero-stage 0
    same_hash "stage 0 vs stage 3 on shards" "$work/s0.txt" "$work/s3.txt"
    # Without --val-shards the last --val-fraction of the training tokens is held out.
    run_ok "$work/f.txt" 2 "${tiny[@]}" --train-shards "$work/train_*.bin" --steps 2
    grep -qF "(36000 train / 4000 val tokens)" "$work/f.txt" || { cat "$work/f.txt"; fail "fraction split"; }
    echo "held out by --val-fraction: ok"
    ;;
  refused)
    shard "$work/bad_vocab.bin" 20240520 0 4000 1234
    shard "$work/bad_magic.bin" 20240521 0 4000
    expect "token >= vocab" \
      "token shard $work/bad_vocab.bin: token 300 at token offset 1234 (byte offset 3492) is not below the model's vocabulary (--vocab 256)" \
      "${tiny[@]}" --steps 2 --train-shards "$work/bad_vocab.bin"
    expect "wrong magic" \
      "token shard $work/bad_magic.bin: magic 20240521 is not llm.c's: expected 20240520 (uint16 tokens) or 20240801 (uint32 tokens)" \
      "${tiny[@]}" --steps 2 --train-shards "$work/bad_magic.bin"
    expect "no match" "--train-shards $work/none_*.bin: matches no file" \
      "${tiny[@]}" --steps 2 --train-shards "$work/none_*.bin"
    expect "two sources" "--data and --train-shards name two data sources: give one" \
      "${tiny[@]}" --steps 2 --data "$corpus" "${shards[@]}"
    expect "empty" "--train-shards is empty (an unset shell variable?)" "${tiny[@]}" --train-shards ""
    # A larger vocabulary takes the same shard.
    run_ok "$work/v.txt" 2 "${tiny[@]}" --steps 2 --vocab 512 --train-shards "$work/bad_vocab.bin"
    echo "--vocab 512 takes token 300: ok"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
