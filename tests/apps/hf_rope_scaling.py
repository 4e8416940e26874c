#!/usr/bin/env python3
"""Hugging Face parity of rope scaling (docs/models.md, "Rope scaling"), in fp32, for a small random
Llama-3-style model (2 layers, hidden 64, 4 heads, 2 KV heads, theta 500000) with rope_type llama3
(Llama-3.1/3.2's, at a small original context so that every band of frequencies is present) and
one with rope_type linear:

1. HF -> zeroshard: the directory imported by gpt_hf_logits on 2 ranks; logits within 1e-4 of
   transformers'. llama3 also as transformers 5.x writes it (rope_parameters).
2. Gradients: zs_train --init-from-hf takes one SGD step (lr 1e4, so that (before - after) / lr
   keeps the gradient's digits); every tensor's gradient within 1e-4 relative L2 of transformers'
   on the same batch (zs_train's sampler, as torch_grad_parity.py rebuilds it).
3. zeroshard -> HF: zs_train --init-from-hf, 3 steps, --export-hf: config.json holds rope_scaling
   with rope_type, transformers loads it and its logits equal ours within 1e-4.
4. Refusals: rope_type yarn / dynamic and a malformed factor in config.json, --rope-scaling
   disagreeing with config.json: zs_train exits 2 naming the field.

transformers before 4.43 (the pinned 4.36.2) has no rope_type llama3 and reads linear only as
{"type": "linear", "factor"}: there the HF model is built with rope_scaling None and its rotary
inv_freq replaced by the reference below (the operations of transformers' _compute_llama3_parameters),
and the exported config.json is checked as JSON, then given to transformers in the form it reads.
With transformers >= 4.43 the configs are used as they are.

usage: hf_rope_scaling.py ZS_TRAIN GPT_HF_LOGITS CORPUS WORKDIR MPIEXEC [MPIEXEC FLAGS...]
"""
import json, math, os, shutil, subprocess, sys

try:
    import torch
    import torch.nn.functional as F
    import transformers
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e} (the HF parity check needs torch, transformers and safetensors)")
    sys.exit(77)

try:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    NATIVE = "llama3" in ROPE_INIT_FUNCTIONS
except ImportError:
    NATIVE = False

zs_train, logits_exe, corpus, work, mpiexec = sys.argv[1:6]
mpi = [mpiexec] + sys.argv[6:]
TOL, GRAD_TOL = 1e-4, 1e-4
T, B, SEED, V = 32, 4, 77, 300
TOKENS = (list(b"The quick brown fox, zeroshard.") + [256, 299, 270, 281])[:T]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.set_num_threads(1)
print(f"transformers {transformers.__version__} ({'native' if NATIVE else 'reference'} rope "
      f"scaling), torch {torch.__version__}")

# head dim 16 at theta 5e5: wavelengths 6.3 .. 2.8e5. original 64 puts the llama3 bounds at 16
# (high 4) and 64 (low 1): kept, blended and divided frequencies all occur.
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
LINEAR = {"rope_type": "linear", "factor": 4.0}


def run(cmd, expect_rc=0):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != expect_rc:
        print(r.stdout)
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}, {expect_rc} expected")
    return r.stdout


def llama3_inv_freq(inv_freq, s):
    """transformers' _compute_llama3_parameters on fp32 tensors, operation for operation."""
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, out)


def readable(scaling):
    """The rope_scaling this transformers reads, and the llama3 scaling to patch in (or None)."""
    if NATIVE or scaling is None:
        return scaling, None
    if scaling["rope_type"] == "linear":  # 4.36: {"type", "factor"}, positions over factor
        return {"type": "linear", "factor": scaling["factor"]}, None
    return None, scaling


def patch(model, llama3):
    if llama3 is None:
        return model
    for layer in model.model.layers:
        rot = layer.self_attn.rotary_emb
        rot.inv_freq = llama3_inv_freq(rot.inv_freq.float(), llama3)
        rot._set_cos_sin_cache(rot.max_seq_len_cached, rot.inv_freq.device, torch.float32)
    return model


def config_for(scaling):
    given, llama3 = readable(scaling)
    return LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       rms_norm_eps=1e-6, rope_theta=500000.0, rope_scaling=given,
                       tie_word_embeddings=False, attention_dropout=0.0), llama3


def edit_config(d, fn):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        c = json.load(f)
    fn(c)
    with open(path, "w") as f:
        json.dump(c, f, indent=2)
    return c


def random_model(name, scaling, seed):
    torch.manual_seed(seed)
    config, llama3 = config_for(scaling)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    patch(model, llama3).eval()
    d = os.path.join(work, name)
    model.save_pretrained(d, safe_serialization=True)
    # The checkpoint's config.json as Llama-3.1's (rope_type); linear keeps what 4.36 wrote
    # ("type"), the older spelling zeroshard reads too.
    if llama3 is not None:
        edit_config(d, lambda c: c.__setitem__("rope_scaling", dict(scaling)))
    return model, d


def load_hf(d, scaling):
    """transformers' model of an HF directory whose config.json holds `scaling`."""
    config, llama3 = config_for(scaling)
    model = LlamaForCausalLM.from_pretrained(d, config=config, torch_dtype=torch.float32)
    return patch(model, llama3).eval()


def theirs(model):
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].float()


def compare(what, hf_dir, want, ranks=2, native=None):
    out = os.path.join(work, f"logits-{len(os.listdir(work))}.json")
    run(mpi + ["-np", str(ranks), logits_exe, hf_dir, ",".join(map(str, TOKENS)), out] +
        ([native] if native else []))
    with open(out) as f:
        a = torch.tensor(json.load(f)["logits"], dtype=torch.float32)
    d = (a - want).abs().max().item()
    print(f"{what}: max |logit difference| = {d:.3e} over {a.numel()} logits "
          f"(|logits| up to {want.abs().max().item():.2f}; tolerance {TOL:g})")
    if not d <= TOL:
        sys.exit(f"FAIL: {what}")
    return a


FLAGS = ["--context", str(T), "--batch", str(B), "--dtype", "fp32", "--eval-every", "0",
         "--sample-tokens", "0", "--data", corpus, "--threads", "1", "--seed", str(SEED)]


def batch():
    """zs_train's first batch (apps/zs_train/dataset.cc), as torch_grad_parity.py rebuilds it."""
    data = open(corpus, "rb").read()
    split = len(data) - int(len(data) * 0.1)
    span, M = split - (T + 1), (1 << 64) - 1

    def mix(x):
        x = (x + 0x9E3779B97F4A7C15) & M
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
        return x ^ (x >> 31)

    starts = [mix(mix(SEED) ^ g) % (span + 1) for g in range(B)]
    return torch.tensor([list(data[s:s + T + 1]) for s in starts], dtype=torch.long)


def gradients(name, model, hf_dir):
    lr = 1e4
    out = os.path.join(work, name + "-step")
    run([zs_train, "--init-from-hf", hf_dir, "--steps", "1", "--lr", str(lr), "--warmup", "0",
         "--min-lr-ratio", "1", "--clip", "0", "--optimizer", "sgd", "--momentum", "0",
         "--weight-decay", "0", "--zero-stage", "0", "--export-hf", out] + FLAGS)
    after = load_file(os.path.join(out, "model.safetensors"))
    tok = batch()
    model.zero_grad()
    logits = model(tok[:, :-1]).logits
    F.cross_entropy(logits.reshape(-1, V), tok[:, 1:].reshape(-1)).backward()
    worst = 0.0
    for k, p in model.named_parameters():
        g = p.grad
        g_zs = (p.detach() - after[k]) / lr
        rel = ((g - g_zs).norm() / g.norm()).item()
        worst = max(worst, rel)
    print(f"{name}: one step's gradients, worst relative L2 difference {worst:.2e} over "
          f"{len(after)} tensors (tolerance {GRAD_TOL:g})")
    if not worst <= GRAD_TOL:
        sys.exit(f"FAIL: {name} gradients")


def round_trip(name, hf_dir, scaling):
    export, native = os.path.join(work, name + "-export"), os.path.join(work, name + ".st")
    out = run(mpi + ["-np", "2", zs_train, "--init-from-hf", hf_dir, "--steps", "3", "--lr",
                     "1e-2", "--warmup", "1", "--zero-stage", "3", "--export-safetensors", native,
                     "--export-hf", export] + FLAGS)
    assert "LlamaForCausalLM" in out, out
    with open(os.path.join(export, "config.json")) as f:
        written = json.load(f)["rope_scaling"]
    assert written == scaling, f"exported rope_scaling {written}, {scaling} expected"
    print(f"{name}: --export-hf wrote rope_scaling {json.dumps(written)}")
    compare(f"{name}: zeroshard -> HF (transformers loads --export-hf after 3 steps)", export,
            theirs(load_hf(export, scaling)), ranks=1, native=native)


for name, scaling, seed in (("llama3", LLAMA3, 1234), ("linear", LINEAR, 99)):
    model, hf_dir = random_model(name, scaling, seed)
    want = theirs(model)
    plain = theirs(load_hf(hf_dir, None))  # the same weights without scaling
    print(f"{name}: the scaling moves transformers' logits by up to "
          f"{(plain - want).abs().max().item():.3f}")
    compare(f"{name}: HF -> zeroshard (2 ranks)", hf_dir, want)
    if name == "llama3":  # transformers 5.x's spelling of the same model
        v5 = os.path.join(work, "llama3-v5")
        shutil.copytree(hf_dir, v5)

        def to_v5(c):
            c["rope_parameters"] = {**c.pop("rope_scaling"), "rope_theta": c.pop("rope_theta")}
        edit_config(v5, to_v5)
        compare("llama3: HF -> zeroshard (5.x rope_parameters, 2 ranks)", v5, want)
    gradients(name, model, hf_dir)
    round_trip(name, hf_dir, scaling)

# ---- refusals: exit 2, the field named ----
bad = os.path.join(work, "bad")
shutil.copytree(os.path.join(work, "llama3"), bad)
for scaling, needle in (
        ({"rope_type": "yarn", "factor": 4.0}, '"rope_scaling.rope_type" is "yarn"'),
        ({"type": "dynamic", "factor": 2.0}, '"rope_scaling.type" is "dynamic"'),
        ({**LLAMA3, "factor": "8"}, '"rope_scaling.factor" is "8", a number expected'),
        ({k: v for k, v in LLAMA3.items() if k != "low_freq_factor"},
         '"rope_scaling.low_freq_factor" is missing')):
    edit_config(bad, lambda c: c.__setitem__("rope_scaling", scaling))
    out = run([zs_train, "--init-from-hf", bad, "--steps", "1"] + FLAGS, expect_rc=2)
    assert needle in out, out
    print(f"refused (exit 2): {needle}")
out = run([zs_train, "--init-from-hf", os.path.join(work, "llama3"), "--rope-scaling",
           "linear:factor=4", "--steps", "1"] + FLAGS, expect_rc=2)
assert '"rope_scaling" is llama3:factor=8,low=1,high=4,original=64, the model\'s rope scaling ' \
       'is linear:factor=4' in out, out
print("refused (exit 2): --rope-scaling disagreeing with config.json's rope_scaling")
out = run([zs_train, "--rope-scaling", "linear:factor=4", "--steps", "1"] + FLAGS, expect_rc=2)
assert "--rope-scaling applies to rotary positions" in out, out
print("refused (exit 2): --rope-scaling with learned positions")
print("PASS")
