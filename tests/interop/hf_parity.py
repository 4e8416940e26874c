#!/usr/bin/env python3
"""Parity of zeroshard's decoder with Hugging Face transformers, in fp32 (docs/interop.md).

For each model below, a randomly initialised transformers model (every parameter moved off its
init, so each mapping matters) is saved with save_pretrained and loaded by zeroshard's Hugging
Face import (hf_parity: one process). On the same tokens
  - our logits of every position must be within 1e-4 (max abs) of transformers',
  - our gradients of the mean next-token cross-entropy over the batch must be within 1e-4
    relative L2 of torch autograd's, tensor by tensor (q/k/v and gate/up fused as our qkv and fc;
    GPT-2's Conv1D weights transposed; a tied embedding is one parameter in both, its gradient
    the sum of both uses).

Models, scaled down in depth and width, keeping the vocabulary, GQA ratio, FFN ratio, tie setting
and rope theta of the named checkpoints:
  gpt2        GPT2LMHeadModel, vocab 50257, tied
  tinyllama   TinyLlama-1.1B: 32 heads over 4 KV heads (8:1), FFN 2.75x, theta 1e4, untied
  smollm      SmolLM-135M: 9 heads over 3 KV heads (3:1), FFN 2.67x, theta 1e4, tied, vocab 49152
  llama3      Llama-3-8B: 32 heads over 8 KV heads (4:1), FFN 3.5x, theta 5e5, untied, vocab 128256
  qwen2       Qwen2-0.5B: 14 heads over 2 KV heads (7:1), q/k/v biases, FFN 5.43x, theta 1e6, tied,
              vocab 151936 (transformers >= 4.37; skipped, saying so, where it has no Qwen2)
  qwen3       Qwen3-0.6B: 4 heads over 2 KV heads (2:1) of head_dim 32 on hidden 64 (heads x
              head_dim = 2 x hidden, as 16 x 128 on 1024), q_norm/k_norm, FFN 3x, theta 1e6, eps
              1e-6, tied, vocab 151936. Qwen3ForCausalLM where transformers has it (>= 4.51);
              otherwise (the CI's 4.36) the reference is LlamaForCausalLM with each layer's
              self_attn replaced by Qwen3LikeAttention below, which computes what
              modeling_qwen3.py's Qwen3Attention does (q_norm and k_norm, Qwen3RMSNorm over each
              head's head_dim vector, before RoPE; head_dim apart from hidden / heads) from the
              same-named parameters, and the saved config.json is rewritten as Qwen3's.

usage: hf_parity.py HF_PARITY WORKDIR [MODEL,...]
Exit 77 (skip) without torch/transformers.
"""
import json, os, shutil, subprocess, sys

try:
    import numpy as np
    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e} (the parity check needs torch and transformers)")
    sys.exit(77)

tool, work = sys.argv[1:3]
TOL_LOGITS, TOL_GRAD = 1e-4, 1e-4
B, T = 2, 16
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.set_num_threads(1)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")


def llama(vocab, hidden, heads, kv, ffn, theta, tied):
    return LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                       num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv,
                       rope_theta=theta, rms_norm_eps=1e-5, tie_word_embeddings=tied,
                       max_position_embeddings=2048, hidden_act="silu")


MODELS = {
    "gpt2": (GPT2LMHeadModel,
             GPT2Config(vocab_size=50257, n_positions=T, n_embd=64, n_layer=2, n_head=4,
                        activation_function="gelu_new", layer_norm_epsilon=1e-5,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
    "tinyllama": (LlamaForCausalLM, llama(32000, 128, 8, 1, 352, 10000.0, False)),
    "smollm": (LlamaForCausalLM, llama(49152, 72, 9, 3, 192, 10000.0, True)),
    "llama3": (LlamaForCausalLM, llama(128256, 128, 8, 2, 448, 500000.0, False)),
}
if hasattr(transformers, "Qwen2ForCausalLM"):
    MODELS["qwen2"] = (transformers.Qwen2ForCausalLM,
                       transformers.Qwen2Config(
                           vocab_size=151936, hidden_size=112, intermediate_size=608,
                           num_hidden_layers=2, num_attention_heads=14, num_key_value_heads=2,
                           rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                           max_position_embeddings=2048, hidden_act="silu",
                           use_sliding_window=False))
else:
    print(f"qwen2: skipped: transformers {transformers.__version__} has no Qwen2ForCausalLM")

# Qwen3-0.6B's ratios (hidden 1024, 16 heads of 128, 8 KV heads, FFN 3072), scaled down.
QWEN3 = dict(vocab_size=151936, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, rope_theta=1000000.0,
             rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=2048,
             hidden_act="silu")


class Qwen3LikeAttention(torch.nn.Module):
    """Qwen3Attention (modeling_qwen3.py) for transformers releases without Qwen3: q_proj
    [H hd, C], k_proj and v_proj [KV hd, C], o_proj [C, H hd], no biases; q_norm and k_norm
    (LlamaRMSNorm over each head's hd vector: Qwen3RMSNorm's arithmetic) on q and k before
    RoPE (rotate_half, inv_freq = theta^(-2i/hd) in fp32, as LlamaRotaryEmbedding); causal
    softmax(q k^T / sqrt(hd)) over repeat_kv'd keys. Called by 4.36's LlamaDecoderLayer (a
    3-tuple back); the causal mask is its own (the test has no padding)."""

    def __init__(self, c):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        C, H, KV, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], \
            c["head_dim"]
        self.H, self.KV, self.hd, self.theta = H, KV, hd, c["rope_theta"]
        self.q_proj = torch.nn.Linear(C, H * hd, bias=False)
        self.k_proj = torch.nn.Linear(C, KV * hd, bias=False)
        self.v_proj = torch.nn.Linear(C, KV * hd, bias=False)
        self.o_proj = torch.nn.Linear(H * hd, C, bias=False)
        self.q_norm = LlamaRMSNorm(hd, eps=c["rms_norm_eps"])
        self.k_norm = LlamaRMSNorm(hd, eps=c["rms_norm_eps"])

    def forward(self, hidden_states, *args, **kwargs):
        b, t, _ = hidden_states.shape
        q = self.q_norm(self.q_proj(hidden_states).view(b, t, self.H, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(b, t, self.KV, self.hd)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, t, self.KV, self.hd).transpose(1, 2)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(t).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()

        def rotate_half(x):
            return torch.cat((-x[..., self.hd // 2:], x[..., :self.hd // 2]), dim=-1)

        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.H // self.KV, dim=1)  # repeat_kv
        v = v.repeat_interleave(self.H // self.KV, dim=1)
        s = torch.matmul(q, k.transpose(2, 3)) / (self.hd ** 0.5)
        s = s + torch.full((t, t), float("-inf")).triu(1)
        p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, t, self.H * self.hd)
        return self.o_proj(o), None, kwargs.get("past_key_value")


def qwen3_like_llama(_config):
    """LlamaForCausalLM with Qwen3LikeAttention in every layer (head_dim = hidden / heads for
    the Llama part, which builds no attention of its own that survives)."""
    c = dict(QWEN3)
    del c["head_dim"]
    model = LlamaForCausalLM(LlamaConfig(**c))
    for layer in model.model.layers:
        layer.self_attn = Qwen3LikeAttention(QWEN3)
    return model


def as_qwen3_config(hf_dir):
    """Rewrites a Qwen3LikeAttention model's config.json as Qwen3's (Qwen3Config's fields)."""
    path = os.path.join(hf_dir, "config.json")
    with open(path) as f:
        j = json.load(f)
    j.update(QWEN3)
    j.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"], attention_bias=False,
             use_sliding_window=False, sliding_window=None, max_window_layers=2)
    for k in ("pretraining_tp", "mlp_bias"):
        j.pop(k, None)
    with open(path, "w") as f:
        json.dump(j, f, indent=2)


if hasattr(transformers, "Qwen3ForCausalLM"):
    MODELS["qwen3"] = (transformers.Qwen3ForCausalLM,
                       transformers.Qwen3Config(**QWEN3, attention_bias=False,
                                                use_sliding_window=False))
else:
    MODELS["qwen3"] = (qwen3_like_llama, LlamaConfig(**{k: v for k, v in QWEN3.items()
                                                         if k != "head_dim"}))
    print(f"qwen3: transformers {transformers.__version__} has no Qwen3ForCausalLM: the reference "
          f"is LlamaForCausalLM with Qwen3LikeAttention")


def ours_of_hf(name, grads, layers, tied):
    """HF gradient tensors (by HF name) in our layout (by '<unit>.<param>')."""
    g = {}
    if name == "gpt2":
        h = "transformer.h."
        g["embed.wte"] = grads["transformer.wte.weight"]
        g["embed.wpe"] = grads["transformer.wpe.weight"]
        for i in range(layers):
            p, u = f"{h}{i}.", f"block.{i}."
            for ours, theirs, t in [("ln1.weight", "ln_1.weight", 0), ("ln1.bias", "ln_1.bias", 0),
                                    ("qkv.weight", "attn.c_attn.weight", 1),
                                    ("qkv.bias", "attn.c_attn.bias", 0),
                                    ("proj.weight", "attn.c_proj.weight", 1),
                                    ("proj.bias", "attn.c_proj.bias", 0),
                                    ("ln2.weight", "ln_2.weight", 0), ("ln2.bias", "ln_2.bias", 0),
                                    ("fc.weight", "mlp.c_fc.weight", 1),
                                    ("fc.bias", "mlp.c_fc.bias", 0),
                                    ("fc_proj.weight", "mlp.c_proj.weight", 1),
                                    ("fc_proj.bias", "mlp.c_proj.bias", 0)]:
                x = grads[p + theirs]
                g[u + ours] = x.t() if t else x
        g["head.ln_f.weight"] = grads["transformer.ln_f.weight"]
        g["head.ln_f.bias"] = grads["transformer.ln_f.bias"]
        if not tied:
            g["head.lm_head.weight"] = grads["lm_head.weight"]
        return g
    g["embed.wte"] = grads["model.embed_tokens.weight"]
    for i in range(layers):
        p, u = f"model.layers.{i}.", f"block.{i}."
        a = p + "self_attn."
        g[u + "ln1.weight"] = grads[p + "input_layernorm.weight"]
        g[u + "qkv.weight"] = torch.cat([grads[a + "q_proj.weight"], grads[a + "k_proj.weight"],
                                         grads[a + "v_proj.weight"]])
        if a + "q_proj.bias" in grads:  # Qwen2: q/k/v biases
            g[u + "qkv.bias"] = torch.cat([grads[a + "q_proj.bias"], grads[a + "k_proj.bias"],
                                           grads[a + "v_proj.bias"]])
        if a + "q_norm.weight" in grads:  # Qwen3: per-head q/k norms
            g[u + "q_norm.weight"] = grads[a + "q_norm.weight"]
            g[u + "k_norm.weight"] = grads[a + "k_norm.weight"]
        g[u + "proj.weight"] = grads[a + "o_proj.weight"]
        g[u + "ln2.weight"] = grads[p + "post_attention_layernorm.weight"]
        g[u + "fc.weight"] = torch.cat([grads[p + "mlp.gate_proj.weight"],
                                        grads[p + "mlp.up_proj.weight"]])
        g[u + "fc_proj.weight"] = grads[p + "mlp.down_proj.weight"]
    g["head.ln_f.weight"] = grads["model.norm.weight"]
    if not tied:
        g["head.lm_head.weight"] = grads["lm_head.weight"]
    return g


def check(name):
    cls, config = MODELS[name]
    torch.manual_seed(1234)
    model = cls(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    model.eval()
    hf_dir = os.path.join(work, name)
    model.save_pretrained(hf_dir, safe_serialization=True)
    if cls is qwen3_like_llama:
        as_qwen3_config(hf_dir)
    vocab = config.vocab_size
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, vocab, (B, T + 1), generator=gen)
    with open(os.path.join(work, name + ".tokens.json"), "w") as f:
        json.dump({"tokens": tokens.tolist()}, f)
    out = os.path.join(work, name + ".ours")
    r = subprocess.run([tool, hf_dir, os.path.join(work, name + ".tokens.json"), out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout)
        sys.exit(f"FAIL: {name}: hf_parity exited {r.returncode}")
    with open(out + ".json") as f:
        index = json.load(f)
    data = np.fromfile(out + ".bin", dtype=np.float32)

    def tensor(entry):
        return torch.from_numpy(data[entry[0]:entry[0] + entry[1]].copy())

    # transformers: logits of every position, and autograd's gradients of the mean loss.
    model.zero_grad()
    logits = model(tokens[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
    loss.backward()
    ours_logits = tensor(index["logits"]).reshape(T, vocab)
    d = (ours_logits - logits[0].detach()).abs().max().item()
    print(f"{name}: loss ours {index['loss']:.6f} theirs {loss.item():.6f}; max |logit diff| "
          f"{d:.2e} over {T}x{vocab} (tolerance {TOL_LOGITS:g})")
    if not d <= TOL_LOGITS:
        sys.exit(f"FAIL: {name}: logits")
    tied = bool(getattr(config, "tie_word_embeddings", True))
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    want = ours_of_hf(name, grads, layers, tied)
    got = {k: tensor(v) for k, v in index["grads"].items()}
    assert index["tied"] == tied, f"{name}: ours tied {index['tied']}, theirs {tied}"
    assert set(got) == set(want), f"{name}: ours {sorted(set(got) - set(want))}, " \
                                  f"theirs {sorted(set(want) - set(got))}"
    worst = ("", 0.0)
    for k, w in want.items():
        w = w.detach().reshape(-1)
        rel = ((got[k] - w).norm() / w.norm()).item()
        if rel > worst[1]:
            worst = (k, rel)
        if not rel <= TOL_GRAD:
            sys.exit(f"FAIL: {name}: gradient of {k}: relative L2 {rel:.2e}")
    print(f"{name}: {len(want)} gradient tensors, worst relative L2 {worst[1]:.2e} ({worst[0]}; "
          f"tolerance {TOL_GRAD:g})")


for n in (sys.argv[3].split(",") if len(sys.argv) > 3 else list(MODELS)):
    check(n)
print("PASS")
