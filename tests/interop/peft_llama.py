#!/usr/bin/env python3
"""LoRA r=8 on an int8 Llama base loaded from a Hugging Face directory; PEFT loads the adapters
(docs/models.md, docs/finetune.md), in fp32.

1. A random LlamaForCausalLM (grouped-query attention, untied, every parameter moved off its
   init) is saved with save_pretrained: the base directory.
2. zs_train --init-from-hf BASE --base-dtype int8 with LoRA r=8 on PEFT's Llama modules
   (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj), one step at lr 0, exports the
   merged model: B is zero, so the export is the int8 base dequantized. Every matrix must equal
   the base quantized here with the documented scheme (core/quantize.h: per-row absmax / 127,
   round-half-even, clamp to +-127) within 1e-7 (fp32 rounding of the scale; one quantization
   step is ~1e-4 here), every other tensor bit for bit.
3. zs_train fine-tunes the adapters (2 ranks, ZeRO-3) on the code corpus and writes them with
   --export-adapters and the merged model with --export-hf.
4. PeftModel.from_pretrained(dequantized base, adapters): every adapter tensor loads; PEFT's
   logits equal the merged export's within 1e-5; with B zeroed they differ by more than 100x that.

usage: peft_llama.py ZS_TRAIN CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
Exit 77 (skip) without torch, transformers, safetensors or peft.
"""
import json, os, shutil, subprocess, sys

try:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    import peft, transformers
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict
except ImportError as e:
    print(f"SKIP: {e} (the PEFT Llama test needs torch, transformers, safetensors and peft)")
    sys.exit(77)

zs_train, corpus, work, mpiexec = sys.argv[1:5]
mpi = [mpiexec] + sys.argv[5:]
L, R, ALPHA, T = 2, 8, 16, 32
TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
TOL = 1e-5
TOKENS = list(b"fn main() { let zeroshard = 1; }")[:T]
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


def load(path):
    model, info = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32,
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


def int8_rows(w):
    """core/quantize.h's vector-wise int8, dequantized: one fp32 scale per row."""
    scale = w.abs().amax(dim=1, keepdim=True) / 127.0
    q = torch.where(scale > 0, torch.round(w / scale), torch.zeros_like(w)).clamp(-127, 127)
    return q * scale


# ---- 1. the base ----
base_dir = os.path.join(work, "base")
torch.manual_seed(99)
config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=L,
                     num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                     rms_norm_eps=1e-5, tie_word_embeddings=False, max_position_embeddings=T,
                     hidden_act="silu")
base = LlamaForCausalLM(config)
with torch.no_grad():
    for p in base.parameters():
        p.add_(0.02 * torch.randn_like(p))
base.save_pretrained(base_dir, safe_serialization=True)

run_flags = ["--init-from-hf", base_dir, "--context", str(T), "--batch", "4", "--dtype", "fp32",
             "--eval-every", "0", "--sample-tokens", "0", "--threads", "1", "--warmup", "1",
             "--zero-stage", "3", "--data", corpus, "--base-dtype", "int8", "--lora-rank", str(R),
             "--lora-alpha", str(ALPHA), "--lora-targets", TARGETS]

# ---- 2. the int8 base, dequantized ----
deq_dir = os.path.join(work, "base_int8")
run(mpi + ["-np", "2", zs_train] + run_flags + ["--steps", "1", "--lr", "0", "--export-hf", deq_dir])
deq = load(deq_dir)
ref = dict(base.named_parameters())
n_int8, worst = 0, 0.0
for name, p in deq.named_parameters():
    want = ref[name].detach()
    if p.dim() == 2:  # every matrix of the frozen base is stored in int8 (vector-wise)
        d = (p.detach() - int8_rows(want)).abs().max().item()
        assert d <= 1e-7, f"{name}: the exported int8 base is {d:.2e} off the reference"
        assert (p.detach() - want).abs().max().item() > 1e-5, f"{name}: not quantized at all"
        n_int8, worst = n_int8 + 1, max(worst, d)
    else:
        assert torch.equal(p.detach(), want), f"{name}: changed on its way through the base"
print(f"int8 base: {n_int8} matrices exported as their vector-wise int8 dequantization (max "
      f"difference {worst:.1e}); every other tensor bit for bit")

# ---- 3. LoRA on the int8 base ----
adapters, merged_dir = os.path.join(work, "adapters"), os.path.join(work, "merged")
run(mpi + ["-np", "2", zs_train] + run_flags +
    ["--steps", "10", "--lr", "1e-2", "--export-adapters", adapters, "--export-hf", merged_dir])
with open(os.path.join(adapters, "adapter_config.json")) as f:
    cfg = json.load(f)
print(f"adapter_config.json: r {cfg['r']}, lora_alpha {cfg['lora_alpha']}, "
      f"target_modules {cfg['target_modules']}, fan_in_fan_out {cfg['fan_in_fan_out']}")
assert cfg["fan_in_fan_out"] is False and cfg["r"] == R
stored = load_file(os.path.join(adapters, "adapter_model.safetensors"))
assert len(stored) == 2 * 7 * L, sorted(stored)

# ---- 4. PEFT over the dequantized base ----
model = PeftModel.from_pretrained(load(deq_dir), adapters)
model.eval()
held = get_peft_model_state_dict(model)
assert set(held) == set(stored), f"PEFT holds {sorted(held)}, the file {sorted(stored)}"
for k, v in stored.items():
    assert torch.equal(held[k].cpu(), v), f"{k}: PEFT's tensor differs from the file's"
n_lora = sum(1 for _, m in model.named_modules() if isinstance(m, peft.tuners.lora.LoraLayer))
assert n_lora == 7 * L, f"{n_lora} LoRA layers, expected {7 * L}"
merged_logits, peft_logits = logits(load(merged_dir)), logits(model)
d = maxdiff(peft_logits, merged_logits)
print(f"PEFT ({n_lora} LoRA layers, {len(stored)} tensors) vs merged export: max |logit "
      f"difference| {d:.3e} over {peft_logits.numel()} logits (tolerance {TOL:g})")
if not d <= TOL:
    sys.exit("FAIL: PEFT's logits differ from the merged export's")
set_peft_model_state_dict(model, {k: (torch.zeros_like(v) if ".lora_B." in k else v)
                                  for k, v in stored.items()})
dz = maxdiff(logits(model), merged_logits)
print(f"B zeroed: max |difference| to the merged export {dz:.3e} (must exceed {100 * TOL:g})")
if not dz > 100 * TOL:
    sys.exit("FAIL: zeroed adapters are not told apart from the trained ones")
print("PASS")
