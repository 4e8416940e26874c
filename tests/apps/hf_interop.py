#!/usr/bin/env python3
"""Hugging Face round trip of zeroshard's GPT (docs/interop.md), both directions, in fp32.

1. zeroshard -> HF: zs_train trains a tiny model a few steps on 2 ranks and writes both its own
   safetensors export and an --export-hf directory. transformers' GPT2LMHeadModel.from_pretrained
   loads the directory as it is (no missing or unexpected tensors); its logits on a fixed input
   equal those zeroshard computes from its own export (gpt_hf_logits NATIVE).
2. HF -> zeroshard: a random GPT2LMHeadModel of the same shape with tied embeddings (HF's
   default), saved with save_pretrained(safe_serialization=True), is imported by zeroshard
   (gpt_hf_logits on 2 ranks: ZeRO-3 shards, so the transposed tensors are read by ranges) with
   the embeddings tied (one parameter, as HF has it); the logits equal HF's. zs_train
   --init-from-hf starts from the same directory and says they are tied; a model flag that
   disagrees with config.json is refused with the field named.

Logits must agree within 1e-5 (max abs difference, printed). Exit 77 (skip) without transformers.

usage: hf_interop.py ZS_TRAIN GPT_HF_LOGITS CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
"""
import json, os, shutil, subprocess, sys

try:
    import torch
    from safetensors import safe_open
    from transformers import GPT2Config, GPT2LMHeadModel
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (the HF round trip needs torch, transformers and safetensors)")
    sys.exit(77)

zs_train, logits_exe, corpus, work, mpiexec = sys.argv[1:6]
mpi = [mpiexec] + sys.argv[6:]
L, H, C, T = 2, 4, 64, 32
TOL = 1e-5
TOKENS = list(b"The quick brown fox, zeroshard.")[:T]
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


def ours(hf_dir, out, ranks, native=None):
    cmd = mpi + ["-np", str(ranks), logits_exe, hf_dir, ",".join(map(str, TOKENS)), out]
    run(cmd + ([native] if native else []))
    with open(out) as f:
        j = json.load(f)
    return torch.tensor(j["logits"], dtype=torch.float32), j["tied"]


def theirs(model):
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].float()


def compare(what, a, b):
    assert a.shape == b.shape, f"{what}: shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    d = (a - b).abs().max().item()
    print(f"{what}: max |logit difference| = {d:.3e} over {a.numel()} logits "
          f"(|logits| up to {b.abs().max().item():.2f}; tolerance {TOL:g})")
    if not d <= TOL:
        sys.exit(f"FAIL: {what}")


model_flags = ["--layers", str(L), "--heads", str(H), "--width", str(C), "--context", str(T),
               "--batch", "4", "--dtype", "fp32", "--eval-every", "0", "--sample-tokens", "0",
               "--data", corpus, "--threads", "1", "--warmup", "1"]

# ---- 1. zeroshard -> HF ----
export, native = os.path.join(work, "export"), os.path.join(work, "native.safetensors")
out = run(mpi + ["-np", "2", zs_train] + model_flags +
          ["--steps", "20", "--lr", "1e-2", "--zero-stage", "3", "--export-safetensors", native, "--export-hf",
           export])
assert "config.json" in out, out
model, info = GPT2LMHeadModel.from_pretrained(export, torch_dtype=torch.float32,
                                              output_loading_info=True)
model.eval()
bad = {k: v for k, v in info.items() if v}
assert not bad, f"from_pretrained loading info: {bad}"
cfg = model.config
assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_positions, cfg.vocab_size) == (L, H, C, T, 256)
assert cfg.tie_word_embeddings is False and cfg.activation_function == "gelu_new"
with safe_open(os.path.join(export, "model.safetensors"), "pt") as f:
    names = set(f.keys())
assert len(names) == 2 + 12 * L + 3, sorted(names)
assert not torch.equal(model.lm_head.weight, model.transformer.wte.weight)
a, _ = ours(export, os.path.join(work, "ours1.json"), 1, native)
compare("zeroshard -> HF (from_pretrained of --export-hf)", a, theirs(model))

# ---- 2. HF -> zeroshard ----
hf_dir = os.path.join(work, "hf")
torch.manual_seed(1234)
config = GPT2Config(vocab_size=256, n_positions=T, n_embd=C, n_layer=L, n_head=H,
                    activation_function="gelu_new", layer_norm_epsilon=1e-5, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0)
hf = GPT2LMHeadModel(config)
with torch.no_grad():
    # HF initialises layer norms to (1, 0) and biases to 0: move every parameter off its init so
    # that each mapping (and each transpose) matters.
    for p in hf.parameters():
        p.add_(0.1 * torch.randn_like(p))
hf.eval()
assert hf.lm_head.weight is hf.transformer.wte.weight
hf.save_pretrained(hf_dir, safe_serialization=True)
with safe_open(os.path.join(hf_dir, "model.safetensors"), "pt") as f:
    stored = set(f.keys())
print(f"save_pretrained wrote {len(stored)} tensors; lm_head.weight stored: "
      f"{'lm_head.weight' in stored} (tied)")
b, tied = ours(hf_dir, os.path.join(work, "ours2.json"), 2)
assert tied, "gpt_hf_logits did not report the tied embeddings"
compare("HF -> zeroshard (import of save_pretrained, tied, 2 ranks)", b, theirs(hf))

# zs_train starts from the directory, says the embeddings are tied, and refuses other shapes.
out = run(mpi + ["-np", "2", zs_train] + model_flags + ["--steps", "1", "--init-from-hf", hf_dir])
line = "tied: lm_head.weight is transformer.wte.weight (one parameter)"
assert line in out, out
print(f"zs_train --init-from-hf: '{line}'")
bad_flags = [x if x != str(L) else str(L + 1) for x in model_flags]
out = run(mpi + ["-np", "2", zs_train] + bad_flags + ["--steps", "1", "--init-from-hf", hf_dir],
          expect_ok=False)
assert '"n_layer" is 2, the model\'s layers is 3' in out, out
print("zs_train --init-from-hf with --layers 3: refused, n_layer named")
print("PASS")
