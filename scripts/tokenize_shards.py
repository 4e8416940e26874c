#!/usr/bin/env python3
"""Text files in, llm.c token shards out, for zs_train --train-shards / --val-shards (issue 27).
(Not named tokenize.py: a script of that name in scripts/ would shadow Python's own tokenize
module for every other script run from here; tests/scripts_names.sh checks that none does.)

    python3 scripts/tokenize_shards.py --out-dir shards --vocab-size 4096 data/*.txt
    python3 scripts/tokenize_shards.py --out-dir shards --tokenizer tokenizer.json --val-fraction 0.05 a.txt

With --vocab-size N a byte-level BPE of N tokens is trained on the inputs (and saved as
OUT/tokenizer.json); with --tokenizer the given Hugging Face tokenizer.json is used. The files are
encoded in the order given and joined; the last --val-fraction of the tokens goes to
OUT/val_000000.bin, the rest to OUT/train_NNNNNN.bin (--shard-tokens per shard). A shard is
llm.c's format: 256 little-endian int32 (magic 20240520 with uint16 tokens when the vocabulary
fits in 65,536 ids, else 20240801 with uint32; version 1; the token count), then the tokens.
Needs Hugging Face `tokenizers` (PyPI); never a dependency of the C++ build.
"""
import os
import sys

# This file's name shadows the standard library's `tokenize` (which linecache and traceback
# import): its folder leaves the module path before anything else is imported.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import array  # noqa: E402
import struct  # noqa: E402

MAGIC_U16, MAGIC_U32 = 20240520, 20240801


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="text files (UTF-8), encoded in this order")
    p.add_argument("--out-dir", required=True, help="directory for the shards (created)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer", help="a Hugging Face tokenizer.json to encode with")
    src.add_argument("--vocab-size", type=int, help="train a byte-level BPE of this many tokens")
    p.add_argument("--val-fraction", type=float, default=0.1,
                   help="share of the tokens held out in val_000000.bin (0: none; default 0.1)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000,
                   help="tokens per training shard (default 1e8, llm.c's)")
    a = p.parse_args(argv)
    if a.vocab_size is not None and not 257 <= a.vocab_size <= 2**31 - 1:
        p.error(f"--vocab-size {a.vocab_size} must be at least 257 (256 bytes + merges)")
    if not 0.0 <= a.val_fraction < 0.5:
        p.error(f"--val-fraction {a.val_fraction} is outside [0, 0.5)")
    if a.shard_tokens < 1:
        p.error(f"--shard-tokens {a.shard_tokens} must be at least 1")
    for f in a.files + ([a.tokenizer] if a.tokenizer else []):
        if not os.path.isfile(f):
            p.error(f"{f}: not a readable file")
    return a


def train_bpe(files, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    return tok


def write_shard(path, tokens, vocab):
    wide = vocab > 65536
    body = array.array("I" if wide else "H", tokens)
    assert body.itemsize == (4 if wide else 2)
    if sys.byteorder != "little":
        body.byteswap()
    header = struct.pack("<256i", MAGIC_U32 if wide else MAGIC_U16, 1, len(tokens), *([0] * 253))
    with open(path, "wb") as f:
        f.write(header)
        f.write(body.tobytes())
    print(f"{path}: {len(tokens)} tokens, uint{32 if wide else 16}")


def main(argv):
    a = parse_args(argv)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("tokenize_shards.py: needs Hugging Face tokenizers: pip install tokenizers")
    tok = Tokenizer.from_file(a.tokenizer) if a.tokenizer else train_bpe(a.files, a.vocab_size)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    tokens = []
    for f in a.files:
        with open(f, encoding="utf-8") as fh:
            tokens.extend(tok.encode(fh.read()).ids)
    n_val = int(len(tokens) * a.val_fraction)
    train, val = tokens[:len(tokens) - n_val], tokens[len(tokens) - n_val:]
    if not train or (a.val_fraction > 0 and not val):
        sys.exit(f"tokenize_shards.py: {len(tokens)} tokens are too few to split with --val-fraction "
                 f"{a.val_fraction}")
    os.makedirs(a.out_dir, exist_ok=True)
    if not a.tokenizer:
        tok.save(os.path.join(a.out_dir, "tokenizer.json"))
    for i in range(0, len(train), a.shard_tokens):
        write_shard(os.path.join(a.out_dir, f"train_{i // a.shard_tokens:06d}.bin"),
                    train[i:i + a.shard_tokens], vocab)
    if val:
        write_shard(os.path.join(a.out_dir, "val_000000.bin"), val, vocab)
    print(f"vocabulary {vocab}: train with --vocab {vocab}")


if __name__ == "__main__":
    main(sys.argv[1:])
