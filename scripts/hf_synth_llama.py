#!/usr/bin/env python3
"""Writes a synthetic Hugging Face LlamaForCausalLM directory of random bf16 weights, as
save_pretrained writes a large model: model-0000i-of-0000N.safetensors shards (greedy in the
state_dict's order, a tensor never split), model.safetensors.index.json and config.json. Streams
each tensor in chunks, so the writer's memory stays at a few hundred MB whatever the model's size.
Needs numpy only (the safetensors format is written directly).

usage: hf_synth_llama.py OUT LAYERS WIDTH HEADS KV_HEADS FFN VOCAB [SHARD_BYTES] [SEED]
"""
import json, os, struct, sys

import numpy as np

out, layers, width, heads, kv, ffn, vocab = sys.argv[1], *map(int, sys.argv[2:8])
shard_bytes = int(sys.argv[8]) if len(sys.argv) > 8 else 5_000_000_000
seed = int(sys.argv[9]) if len(sys.argv) > 9 else 1
head_dim = width // heads
CHUNK = 1 << 24  # elements per generated chunk (64 MB of fp32)

# LlamaForCausalLM.state_dict()'s order and shapes.
tensors = [("model.embed_tokens.weight", (vocab, width))]
for i in range(layers):
    p = f"model.layers.{i}."
    tensors += [(p + "self_attn.q_proj.weight", (heads * head_dim, width)),
                (p + "self_attn.k_proj.weight", (kv * head_dim, width)),
                (p + "self_attn.v_proj.weight", (kv * head_dim, width)),
                (p + "self_attn.o_proj.weight", (width, heads * head_dim)),
                (p + "mlp.gate_proj.weight", (ffn, width)),
                (p + "mlp.up_proj.weight", (ffn, width)),
                (p + "mlp.down_proj.weight", (width, ffn)),
                (p + "input_layernorm.weight", (width,)),
                (p + "post_attention_layernorm.weight", (width,))]
tensors += [("model.norm.weight", (width,)), ("lm_head.weight", (vocab, width))]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# save_pretrained's greedy split.
shards, cur = [[]], 0
for name, shape in tensors:
    b = 2 * numel(shape)
    if shards[-1] and cur + b > shard_bytes:
        shards.append([])
        cur = 0
    shards[-1].append((name, shape))
    cur += b
n = len(shards)
names = ([f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)] if n > 1
         else ["model.safetensors"])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(seed)


def write_values(f, name, count):
    """count bf16 values: norms near 1, matrices N(0, 0.02), truncated from fp32."""
    left = count
    while left > 0:
        k = min(CHUNK, left)
        x = rng.standard_normal(k, dtype=np.float32) * np.float32(0.02)
        if name.endswith("norm.weight"):
            x += np.float32(1.0)
        f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())
        left -= k


weight_map, total = {}, 0
for fname, shard in zip(names, shards):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shard:
        b = 2 * numel(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + b]}
        off += b
        weight_map[name] = fname
    total += off
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(out, fname), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in shard:
            write_values(f, name, numel(shape))
    print(f"wrote {fname} ({off / 1e9:.2f} GB)", flush=True)
if n > 1:
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                           indent=2, sort_keys=True) + "\n")
config = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
          "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
          "hidden_size": width, "initializer_range": 0.02, "intermediate_size": ffn,
          "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": heads,
          "num_hidden_layers": layers, "num_key_value_heads": kv, "pretraining_tp": 1,
          "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
          "vocab_size": vocab}
with open(os.path.join(out, "config.json"), "w") as f:
    f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
print(f"{out}: {n} file(s), {total / 1e9:.2f} GB of bf16 tensors")
