#!/usr/bin/env python3
"""Hugging Face PEFT loads zs_train's LoRA adapters (docs/finetune.md, docs/interop.md), in fp32.

1. zs_train pretrains a tiny base on the license prose (2 ranks, ZeRO-3) and writes it as a
   native safetensors file and as an --export-hf directory.
2. zs_train fine-tunes LoRA adapters (r = 4, alpha = 8, all four targets) on that base on the
   code corpus (2 ranks, ZeRO-3, fp32 base), and writes the adapters with --export-adapters DIR
   and the merged model (W + (alpha/r) B A) with --export-hf.
3. transformers loads the base directory, PeftModel.from_pretrained(base, DIR) applies the
   adapters, and:
   (a) every adapter tensor in DIR is loaded: the model's adapter weights after from_pretrained
       are the file's tensors, same names, bit for bit, and loading the file's state dict into the
       PEFT model leaves no unexpected key and no missing adapter key;
   (b) PEFT's logits equal the logits of the merged export within TOL (max abs difference,
       printed): the two compute W x + s B (A x) and (W + s B A) x in fp32;
   (c) the same adapters with B zeroed (PEFT then computes the base) differ from the merged
       logits by more than 100 TOL, so (b) can fail.

Exit 77 (skip) without torch, transformers, safetensors or peft.

usage: peft_load.py ZS_TRAIN BASE_CORPUS FINETUNE_CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
"""
import json, os, shutil, subprocess, sys

try:
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2LMHeadModel
    import peft, transformers
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict
except ImportError as e:
    print(f"SKIP: {e} (the PEFT load test needs torch, transformers, safetensors and peft)")
    sys.exit(77)

zs_train, base_corpus, ft_corpus, work, mpiexec = sys.argv[1:6]
mpi = [mpiexec] + sys.argv[6:]
L, H, C, T, R, ALPHA = 2, 4, 64, 32, 4, 8
TOL = 1e-5
TOKENS = list(b"int main() { return zeroshard; }")[:T]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.set_num_threads(1)
print(f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout)
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}")
    return r.stdout


def load_hf(path):
    model, info = GPT2LMHeadModel.from_pretrained(path, torch_dtype=torch.float32,
                                                  output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    assert not bad, f"from_pretrained({path}) loading info: {bad}"
    return model.eval()


def logits(model):
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].float()


def maxdiff(a, b):
    assert a.shape == b.shape, f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    return (a - b).abs().max().item()


model_flags = ["--layers", str(L), "--heads", str(H), "--width", str(C), "--context", str(T),
               "--batch", "4", "--dtype", "fp32", "--eval-every", "0", "--sample-tokens", "0",
               "--threads", "1", "--warmup", "1", "--zero-stage", "3"]

# ---- 1. the base ----
native, base_hf = os.path.join(work, "base.safetensors"), os.path.join(work, "base_hf")
run(mpi + ["-np", "2", zs_train] + model_flags +
    ["--data", base_corpus, "--steps", "20", "--lr", "1e-2", "--export-safetensors", native,
     "--export-hf", base_hf])

# ---- 2. LoRA on the base, on the code corpus ----
adapters, merged_hf = os.path.join(work, "adapters"), os.path.join(work, "merged_hf")
out = run(mpi + ["-np", "2", zs_train] + model_flags +
          ["--data", ft_corpus, "--steps", "10", "--lr", "1e-2", "--init-safetensors", native,
           "--lora-rank", str(R), "--lora-alpha", str(ALPHA), "--export-adapters", adapters,
           "--export-hf", merged_hf])
with open(os.path.join(adapters, "adapter_config.json")) as f:
    cfg = json.load(f)
print(f"adapter_config.json: r {cfg['r']}, lora_alpha {cfg['lora_alpha']}, "
      f"target_modules {cfg['target_modules']}, fan_in_fan_out {cfg['fan_in_fan_out']}")
stored = load_file(os.path.join(adapters, "adapter_model.safetensors"))
assert len(stored) == 2 * 4 * L, sorted(stored)

# ---- 3. PEFT ----
base = load_hf(base_hf)
base_logits = logits(base)
model = PeftModel.from_pretrained(base, adapters)
model.eval()
assert isinstance(model.base_model, peft.tuners.lora.LoraModel), type(model.base_model)

# (a) from_pretrained put every tensor of the file into the model as stored, and loading the file's
# state dict again names no unexpected key and no missing adapter key.
held = get_peft_model_state_dict(model)
assert set(held) == set(stored), f"PEFT holds {sorted(held)}, the file {sorted(stored)}"
for k, v in stored.items():
    assert torch.equal(held[k].cpu(), v), f"{k}: PEFT's tensor differs from the file's"
res = set_peft_model_state_dict(model, stored)
unexpected = list(res.unexpected_keys)
missing = [k for k in res.missing_keys if "lora_" in k]
assert not unexpected and not missing, f"unexpected {unexpected}, missing adapter keys {missing}"
n_lora = sum(1 for n, m in model.named_modules() if isinstance(m, peft.tuners.lora.LoraLayer))
assert n_lora == 4 * L, f"{n_lora} LoRA layers, expected {4 * L}"
print(f"(a) PEFT loaded all {len(stored)} adapter tensors into {n_lora} LoRA layers: "
      "no unexpected or missing adapter keys, every tensor equal to the file's")

# (b) PEFT over the base == the merged export.
merged_logits = logits(load_hf(merged_hf))
peft_logits = logits(model)
d = maxdiff(peft_logits, merged_logits)
print(f"(b) PEFT vs merged export: max |logit difference| = {d:.3e} over {peft_logits.numel()} "
      f"logits (|logits| up to {merged_logits.abs().max().item():.2f}; tolerance {TOL:g})")
if not d <= TOL:
    sys.exit("FAIL: PEFT's logits differ from the merged export's")

# (c) a different adapter does not match: B zeroed gives the base back, away from the merge.
zeroed = {k: (torch.zeros_like(v) if ".lora_B." in k else v) for k, v in stored.items()}
set_peft_model_state_dict(model, zeroed)
zero_logits = logits(model)
dz, db = maxdiff(zero_logits, merged_logits), maxdiff(zero_logits, base_logits)
print(f"(c) B zeroed: max |difference| to the merged export {dz:.3e} (must exceed {100 * TOL:g}), "
      f"to the base {db:.3e}")
if not dz > 100 * TOL:
    sys.exit("FAIL: zeroed adapters are not told apart from the trained ones")
if not db <= TOL:
    sys.exit("FAIL: PEFT with B = 0 is not the base")
print("PASS")
