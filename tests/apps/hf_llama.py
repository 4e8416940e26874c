#!/usr/bin/env python3
"""Hugging Face parity of zeroshard's decoder for the Llama family (docs/interop.md), in fp32.

1. HF -> zeroshard: a random LlamaForCausalLM (2 layers, hidden 64, 4 heads, 2 KV heads,
   intermediate 160, vocab 300), saved with save_pretrained(safe_serialization=True) as one file
   and as a sharded index, is imported by zeroshard (gpt_hf_logits on 2 ranks: ZeRO-3 shards, so
   q/k/v and gate/up are read by row ranges); our logits equal transformers' within 1e-4. A tied
   variant is imported tied (one parameter), on 2 ranks.
2. zeroshard -> HF: zs_train --init-from-hf builds the model from that directory (a flag that
   disagrees with config.json is refused naming both), trains a few steps and writes
   --export-hf; AutoModelForCausalLM.from_pretrained loads it with no missing or unexpected
   tensors and its logits equal ours (gpt_hf_logits on our own safetensors export).

usage: hf_llama.py ZS_TRAIN GPT_HF_LOGITS CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
"""
import json, os, shutil, subprocess, sys

try:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e} (the HF parity check needs torch and transformers)")
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


def ours(hf_dir, out, ranks, native=None):
    cmd = mpi + ["-np", str(ranks), logits_exe, hf_dir, ",".join(map(str, TOKENS)), out]
    run(cmd + ([native] if native else []))
    with open(out) as f:
        return json.load(f)


def theirs(model):
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].float()


def compare(what, j, b):
    a = torch.tensor(j["logits"], dtype=torch.float32)
    assert a.shape == b.shape, f"{what}: shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    d = (a - b).abs().max().item()
    print(f"{what}: max |logit difference| = {d:.3e} over {a.numel()} logits "
          f"(|logits| up to {b.abs().max().item():.2f}; tolerance {TOL:g})")
    if not d <= TOL:
        sys.exit(f"FAIL: {what}")


def random_llama(tied, seed):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=160,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=50000.0,
                         tie_word_embeddings=tied, attention_dropout=0.0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        # RMSNorm weights start at 1: move every parameter off its init so each mapping matters.
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


# ---- 1. HF -> zeroshard ----
hf_dir, sharded = os.path.join(work, "hf"), os.path.join(work, "hf-sharded")
hf = random_llama(False, 1234)
hf.save_pretrained(hf_dir, safe_serialization=True)
hf.save_pretrained(sharded, safe_serialization=True, max_shard_size="100KB")
assert os.path.exists(os.path.join(sharded, "model.safetensors.index.json")), os.listdir(sharded)
want = theirs(hf)
j = ours(hf_dir, os.path.join(work, "ours1.json"), 2)
assert j["model_type"] == "llama" and j["shards"] == 1 and not j["tied"], j.keys()
compare("HF -> zeroshard (LlamaForCausalLM, GQA, 2 ranks)", j, want)
j = ours(sharded, os.path.join(work, "ours2.json"), 2)
assert j["shards"] > 1, j["shards"]
compare(f"HF -> zeroshard (sharded index, {j['shards']} files, 2 ranks)", j, want)
tied_dir = os.path.join(work, "hf-tied")
tied = random_llama(True, 99)
assert tied.lm_head.weight is tied.model.embed_tokens.weight
tied.save_pretrained(tied_dir, safe_serialization=True)
j = ours(tied_dir, os.path.join(work, "ours3.json"), 2)
assert j["tied"], "gpt_hf_logits did not report the tied embeddings"
compare("HF -> zeroshard (tied: one parameter, 2 ranks)", j, theirs(tied))

# ---- 2. zeroshard -> HF ----
export, native = os.path.join(work, "export"), os.path.join(work, "native.safetensors")
flags = ["--context", str(T), "--batch", "4", "--dtype", "fp32", "--eval-every", "0",
         "--sample-tokens", "0", "--data", corpus, "--threads", "1", "--warmup", "1"]
out = run(mpi + ["-np", "2", zs_train, "--init-from-hf", hf_dir] + flags +
          ["--steps", "5", "--lr", "1e-2", "--zero-stage", "3", "--export-safetensors", native,
           "--export-hf", export])
assert "LlamaForCausalLM" in out, out
model, info = AutoModelForCausalLM.from_pretrained(export, torch_dtype=torch.float32,
                                                   output_loading_info=True)
model.eval()
bad = {k: v for k, v in info.items() if v}
assert not bad, f"from_pretrained loading info: {bad}"
assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
c = model.config
assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
        c.intermediate_size, c.vocab_size) == (2, 64, 4, 2, 160, 300), c
assert c.rope_theta == 50000.0 and c.rms_norm_eps == 1e-6 and not c.tie_word_embeddings, c
j = ours(export, os.path.join(work, "ours4.json"), 1, native)
mine = torch.tensor(j["logits"])
assert (mine - want).abs().max().item() > 1e-3, "training did not change the model"
compare("zeroshard -> HF (from_pretrained of --export-hf after 5 steps)", j, theirs(model))

out = run(mpi + ["-np", "2", zs_train, "--init-from-hf", hf_dir, "--width", "128"] + flags +
          ["--steps", "1"], expect_ok=False)
assert '"hidden_size" is 64, the model\'s width is 128' in out, out
print("zs_train --init-from-hf with --width 128: refused, hidden_size named")
print("PASS")
