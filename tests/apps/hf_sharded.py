#!/usr/bin/env python3
"""Sharded Hugging Face directories, both directions (docs/interop.md), at 1 and 2 ranks.

1. HF -> zeroshard: a random bf16 LlamaForCausalLM saved with save_pretrained(dir,
   max_shard_size=...) as 3 shard files and an index is imported exactly: zs_train
   --init-from-hf with --lr 0 writes it back (--export-dtype bf16) with every tensor equal to
   transformers' bit for bit, and our logits (gpt_hf_logits, 2 ranks) equal those of the HF model
   loaded in fp32 within 1e-4.
2. zeroshard -> HF: zs_train --export-hf with a small --export-shard-size, at 1 and 2 ranks, writes
   N > 1 files and model.safetensors.index.json (the same bytes at both world sizes, the index as
   transformers writes it); from_pretrained loads it with no missing or unexpected tensor and its
   logits equal ours; --init-from-hf of it gives the same param_hash (bitwise round trip); a bad
   --export-shard-size is refused naming the flag.

usage: hf_sharded.py ZS_TRAIN GPT_HF_LOGITS CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
"""
import filecmp, json, os, re, shutil, subprocess, sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e} (the HF check needs torch, transformers and safetensors)")
    sys.exit(77)

zs_train, logits_exe, corpus, work, mpiexec = sys.argv[1:6]
mpi = [mpiexec] + sys.argv[6:]
TOL = 1e-4
T = 32
TOKENS = (list(b"The quick brown fox, zeroshard.") + [256, 299, 270, 281])[:T]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.set_num_threads(1)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if (r.returncode == 0) != expect_ok:
        print(r.stdout)
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}")
    return r.stdout


def param_hash(out):
    m = re.search(r"^param_hash: ([0-9a-f]+)$", out, re.M)
    assert m, out
    return m.group(1)


def ours(hf_dir, out, ranks):
    run(mpi + ["-np", str(ranks), logits_exe, hf_dir, ",".join(map(str, TOKENS)), out])
    with open(out) as f:
        return json.load(f)


def theirs(model):
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].float()


def compare(what, j, b):
    a = torch.tensor(j["logits"], dtype=torch.float32)
    assert a.shape == b.shape, f"{what}: shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    d = (a - b).abs().max().item()
    print(f"{what}: max |logit difference| = {d:.3e} over {a.numel()} logits (tolerance {TOL:g})")
    if not d <= TOL:
        sys.exit(f"FAIL: {what}")


def weight_files(d):
    return sorted(f for f in os.listdir(d) if f.startswith("model") and f.endswith(".safetensors"))


def tensors(d):
    out = {}
    for f in weight_files(d):
        out.update(load_file(os.path.join(d, f)))
    return out


def shards_of(sizes, limit):
    """save_pretrained's greedy split: the number of files."""
    n, cur, filled = 1, 0, 0
    for s in sizes:
        if filled and cur + s > limit:
            n, cur, filled = n + 1, 0, 0
        cur, filled = cur + s, filled + 1
    return n


# ---- 1. HF -> zeroshard: 3 bf16 shards ----
torch.manual_seed(4321)
config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                     rms_norm_eps=1e-6, rope_theta=50000.0, tie_word_embeddings=False,
                     attention_dropout=0.0)
hf = LlamaForCausalLM(config)
with torch.no_grad():
    for p in hf.parameters():  # off their init (norms at 1), so each mapping matters
        p.add_(0.05 * torch.randn_like(p))
hf = hf.to(torch.bfloat16).eval()
sizes = [t.numel() * 2 for t in hf.state_dict().values()]
limit = next(s for s in range(sum(sizes) // 3, sum(sizes)) if shards_of(sizes, s) == 3)
src = os.path.join(work, "hf-bf16")
hf.save_pretrained(src, safe_serialization=True, max_shard_size=limit)
assert weight_files(src) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)], \
    os.listdir(src)
assert os.path.exists(os.path.join(src, "model.safetensors.index.json"))
reference = tensors(src)
hf32 = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).eval()
want = theirs(hf32)

flags = ["--context", str(T), "--batch", "4", "--dtype", "fp32", "--eval-every", "0",
         "--sample-tokens", "0", "--data", corpus, "--threads", "1", "--warmup", "1",
         "--steps", "1", "--lr", "0", "--zero-stage", "3"]
back = os.path.join(work, "back-bf16")
out = run(mpi + ["-np", "2", zs_train, "--init-from-hf", src, "--export-hf", back,
                 "--export-dtype", "bf16"] + flags)
got = tensors(back)
assert sorted(got) == sorted(reference), (sorted(got), sorted(reference))
for name, t in reference.items():
    if not torch.equal(got[name].view(torch.int16), t.view(torch.int16)):
        sys.exit(f"FAIL: {name} differs after import and bf16 export")
print(f"HF -> zeroshard: 3 bf16 shards imported exactly ({len(reference)} tensors bit for bit "
      "through --init-from-hf and --export-dtype bf16, 2 ranks)")
j = ours(src, os.path.join(work, "ours-src.json"), 2)
assert j["shards"] == 3, j["shards"]
compare("HF -> zeroshard (3 bf16 shards, 2 ranks, logits in fp32)", j, want)

# ---- 2. zeroshard -> HF: --export-hf in shards ----
exports = {}
for ranks in (1, 2):
    d = os.path.join(work, f"export-np{ranks}")
    out = run(mpi + ["-np", str(ranks), zs_train, "--init-from-hf", src, "--export-hf", d,
                     "--export-shard-size", "60KB"] + flags)
    exports[ranks] = (d, param_hash(out))
    files = weight_files(d)
    n = len(files)
    assert n > 1 and files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)], files
    m = re.search(r"exported .*: (\d+) safetensors files of at most 60KB", out)
    assert m and int(m.group(1)) == n, out
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        text = f.read()
    index = json.loads(text)
    # The index as save_pretrained writes it: sorted keys, indent 2, a final newline.
    assert text == json.dumps(index, indent=2, sort_keys=True) + "\n", text[:200]
    total = 0
    for fname in files:
        for name, t in load_file(os.path.join(d, fname)).items():
            assert index["weight_map"][name] == fname, (name, fname)
            total += t.numel() * t.element_size()
    assert index["metadata"]["total_size"] == total, (index["metadata"], total)
    for fname in files:
        assert os.path.getsize(os.path.join(d, fname)) <= 60_000 + 4096 or \
            len(load_file(os.path.join(d, fname))) == 1, fname
    print(f"zeroshard -> HF at {ranks} rank(s): {n} files and the index, total_size {total}")
d1, d2 = exports[1][0], exports[2][0]
assert weight_files(d1) == weight_files(d2)
for f in weight_files(d1) + ["model.safetensors.index.json", "config.json"]:
    assert filecmp.cmp(os.path.join(d1, f), os.path.join(d2, f), shallow=False), f
print("the 1-rank and 2-rank exports are the same bytes")
assert exports[1][1] == exports[2][1], exports

model, info = AutoModelForCausalLM.from_pretrained(d2, torch_dtype=torch.float32,
                                                   output_loading_info=True)
model.eval()
bad = {k: v for k, v in info.items() if v}
assert not bad, f"from_pretrained loading info: {bad}"
j = ours(d2, os.path.join(work, "ours-export.json"), 2)
compare("zeroshard -> HF (from_pretrained of a sharded --export-hf)", j, theirs(model))
for ranks in (1, 2):
    out = run(mpi + ["-np", str(ranks), zs_train, "--init-from-hf", d2] + flags)
    assert param_hash(out) == exports[2][1], (param_hash(out), exports[2][1])
print(f"--init-from-hf of the sharded export: param_hash {exports[2][1]} at 1 and 2 ranks "
      "(bitwise round trip)")

out = run(mpi + ["-np", "2", zs_train, "--init-from-hf", src, "--export-hf", d2,
                 "--export-shard-size", "5XB"] + flags, expect_ok=False)
assert "--export-shard-size 5XB: unknown unit" in out, out
print("--export-shard-size 5XB: refused, the flag named")
print("PASS")
