#!/usr/bin/env python3
"""Gradient parity of zeroshard's GPT with PyTorch, parameter by parameter.

zeroshard's zs_train exports its initial weights (safetensors), then takes one SGD step with
lr 1, no momentum, decay or clipping, and exports again: init - after = the gradient of the mean
cross-entropy on its first batch. The same model written in PyTorch loads the initial weights,
rebuilds that batch with zs_train's sampler (a pure function of seed and sequence index) and
computes its gradient. Every tensor must agree to 1e-3 relative (fp32; the difference left is
the rounding of the SGD subtraction and of the sums). Exit 77 (skip) without torch.

usage: torch_grad_parity.py ZS_TRAIN CORPUS WORKDIR
"""
import json, math, os, struct, subprocess, sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("SKIP: python torch is not installed")
    sys.exit(77)

zs_train, corpus, work = sys.argv[1:4]
T, B, C, L, H, V = 32, 6, 64, 2, 4, 256
SEED = 77
os.makedirs(work, exist_ok=True)
common = [zs_train, "--layers", str(L), "--heads", str(H), "--width", str(C), "--context", str(T),
          "--batch", str(B), "--zero-stage", "0", "--dtype", "fp32", "--seed", str(SEED),
          "--steps", "1", "--warmup", "0", "--min-lr-ratio", "1", "--clip", "0",
          "--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0", "--eval-every", "0",
          "--sample-tokens", "0", "--data", corpus, "--threads", "1"]
init, after = os.path.join(work, "init.safetensors"), os.path.join(work, "after.safetensors")
for lr, out in (("0", init), ("1", after)):
    subprocess.run(common + ["--lr", lr, "--export-safetensors", out], check=True,
                   stdout=subprocess.DEVNULL)


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32)
        out[k] = t.reshape(v["shape"]).clone()
    return out


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b = x.size(0)
        q, k, v = self.qkv(self.ln1(x)).split(C, 2)
        q, k, v = (t.view(b, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
        a = a.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        x = x + self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(b, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for blk in self.blocks:
            x = blk(x)
        return F.cross_entropy(self.lm_head(self.ln_f(x)).reshape(-1, V), tgt.reshape(-1))


names = {"wte.weight": "embed.wte", "wpe.weight": "embed.wpe", "ln_f.weight": "head.ln_f.weight",
         "ln_f.bias": "head.ln_f.bias", "lm_head.weight": "head.lm_head.weight"}
for i in range(L):
    for p in ("ln1", "ln2", "qkv", "proj", "fc", "fc_proj"):
        for t in ("weight", "bias"):
            names[f"blocks.{i}.{p}.{t}"] = f"block.{i}.{p}.{t}"
w0, w1 = load(init), load(after)
model = GPT()
model.load_state_dict({k: w0[v] for k, v in names.items()})

# zs_train's sampler (apps/zs_train/dataset.cc): sequence g starts at
# mix(mix(seed) ^ g) % (span + 1) in the training part (the text less its 10% tail).
data = open(corpus, "rb").read()
split = len(data) - int(len(data) * 0.1)
span = split - (T + 1)
M = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


starts = [mix(mix(SEED) ^ g) % (span + 1) for g in range(B)]
tok = torch.tensor([list(data[s:s + T + 1]) for s in starts], dtype=torch.long)
loss = model(tok[:, :-1], tok[:, 1:])
loss.backward()
params = dict(model.named_parameters())
worst = 0.0
for k, v in names.items():
    g_torch = params[k].grad
    g_zs = w0[v] - w1[v]
    rel = ((g_torch - g_zs).norm() / g_torch.norm()).item()
    worst = max(worst, rel)
    print(f"{v:26s} |grad| {g_torch.norm().item():.4e}  relative difference {rel:.2e}")
print(f"torch {torch.__version__}: loss {loss.item():.6f}, worst relative gradient difference {worst:.2e}")
sys.exit(0 if worst < 1e-3 else 1)
