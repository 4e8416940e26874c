#!/usr/bin/env python3
"""Llama-shaped decoder trained with AdamW on synthetic random tokens, CPU only: the PyTorch peer
of zs_train --family llama (bench/bench_llama.sh runs both side by side).

Plain PyTorch, no transformers: RMSNorm (F.rms_norm where the torch version has it), rotary
positions with rotate_half (Hugging Face's LlamaRotaryEmbedding layout, cos/sin cast to the
activations' dtype), grouped-query attention with repeat_kv, SwiGLU MLP, no biases, an untied
lm_head, loss in fp32. The command line and output follow ../shared/peers/torch_gpt_cpu.py:
"step" lines, then "RESULT {json}" (the full record, also appended to --json) and "JSON {json}"
(the compact one, also appended to --out).

Modes
  single : one process, --threads intra-op threads
  ddp    : DistributedDataParallel, gloo, world W (mp.spawn, or torchrun if RANK is set)
  fsdp2  : torch.distributed.fsdp.fully_shard per block + root on init_device_mesh("cpu", (W,)),
           MixedPrecisionPolicy(param_dtype=--fsdp2_param_dtype, reduce_dtype=fp32); needs a
           torch that has fully_shard (2.6+); otherwise prints FSDP2_UNSUPPORTED and exits 0
           without a result
Each rank processes --batch sequences per step (global batch = W * batch). Precision: fp32 or
--autocast bf16 (CPU autocast, fp32 master weights). Attention: eager (matmul + masked softmax)
or --sdpa (F.scaled_dot_product_attention, causal). --compile: torch.compile (inductor).
tokens/s = W * batch * seq_len / the slowest rank's median step time after --warmup steps.

Examples
  python torch_llama_cpu.py --mode single --threads 2 --autocast bf16 --sdpa
  python torch_llama_cpu.py --mode ddp --world 2            # 1 thread per rank
  python torch_llama_cpu.py --mode fsdp2 --world 2 --autocast bf16 --fsdp2_param_dtype bf16
"""
import argparse, json, math, os, resource, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["single", "ddp", "fsdp2"], default="single")
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank; 0 = max(1, cores // world)")
    p.add_argument("--n_layer", type=int, default=4)
    p.add_argument("--n_head", type=int, default=8)
    p.add_argument("--n_kv_head", type=int, default=2, help="key/value heads (GQA), dividing --n_head")
    p.add_argument("--n_embd", type=int, default=256)
    p.add_argument("--ffn", type=int, default=688, help="SwiGLU hidden width (gate/up rows)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--batch", type=int, default=8, help="per-rank micro batch (sequences)")
    p.add_argument("--norm_eps", type=float, default=1e-5)
    p.add_argument("--rope_theta", type=float, default=10000.0)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--foreach", action="store_true", help="AdamW(foreach=True)")
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True) (torch 2.4+ on CPU)")
    p.add_argument("--autocast", choices=["none", "bf16"], default="none",
                   help="CPU autocast: bf16 matmuls through oneDNN, fp32 master weights")
    p.add_argument("--sdpa", action="store_true", help="attention through F.scaled_dot_product_attention")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (inductor, C++ codegen on CPU)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--port", type=int, default=29631)
    p.add_argument("--json", default="", help="append the full JSON result line to this file")
    p.add_argument("--out", default="", help="append the compact JSON result line to this file ('-' = stdout only)")
    p.add_argument("--backend", default="gloo", help="process-group backend string, e.g. gloo or cpu:gloo")
    p.add_argument("--fsdp2_param_dtype", choices=["bf16", "fp32"], default="bf16", help="fsdp2 MixedPrecisionPolicy.param_dtype")
    p.add_argument("--fsdp2_reshard", choices=["true", "false"], default="true", help="fsdp2 reshard_after_forward")
    a = p.parse_args()
    if a.n_embd % a.n_head or a.n_head % a.n_kv_head or (a.n_embd // a.n_head) % 2:
        p.error(f"--n_embd {a.n_embd}, --n_head {a.n_head}, --n_kv_head {a.n_kv_head}: need heads | width, "
                "kv heads | heads and an even head dimension")
    if a.sdpa and not hasattr(F, "scaled_dot_product_attention"):
        p.error(f"--sdpa: torch {torch.__version__} has no F.scaled_dot_product_attention (2.0+)")
    if a.compile and not hasattr(torch, "compile"):
        p.error(f"--compile: torch {torch.__version__} has no torch.compile (2.0+)")
    if a.warmup >= a.steps:
        p.error(f"--warmup {a.warmup} must be below --steps {a.steps}")
    return a


# ----------------------------------------------------------------------------- model
def rms_norm(x, weight, eps):
    if hasattr(F, "rms_norm"):                       # torch 2.4+: one op (fused on recent CPUs builds)
        return F.rms_norm(x, (x.size(-1),), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    """[B, KV, T, hd] -> [B, KV * n_rep, T, hd], each key/value head serving n_rep query heads."""
    if n_rep == 1:
        return x
    B, KV, T, hd = x.shape
    return x[:, :, None].expand(B, KV, n_rep, T, hd).reshape(B, KV * n_rep, T, hd)


class Block(nn.Module):
    SDPA = False

    def __init__(self, a):
        super().__init__()
        C, self.H, self.KV = a.n_embd, a.n_head, a.n_kv_head
        self.hd, self.eps = C // a.n_head, a.norm_eps
        self.attn_norm = nn.Parameter(torch.ones(C))
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, self.KV * self.hd, bias=False)
        self.v_proj = nn.Linear(C, self.KV * self.hd, bias=False)
        self.o_proj = nn.Linear(C, C, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(C))
        self.gate_proj = nn.Linear(C, a.ffn, bias=False)
        self.up_proj = nn.Linear(C, a.ffn, bias=False)
        self.down_proj = nn.Linear(a.ffn, C, bias=False)

    def attention(self, h, cos, sin, mask):
        B, T, C = h.shape
        q = self.q_proj(h).view(B, T, self.H, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.KV, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.KV, self.hd).transpose(1, 2)
        cos, sin = cos[:T].to(q.dtype), sin[:T].to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.H // self.KV), repeat_kv(v, self.H // self.KV)
        if Block.SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            att = att.masked_fill(~mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(rms_norm(x, self.attn_norm, self.eps), cos, sin, mask)
        h = rms_norm(x, self.mlp_norm, self.eps)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        C, hd = a.n_embd, a.n_embd // a.n_head
        self.eps = a.norm_eps
        self.embed = nn.Embedding(a.vocab, C)
        self.h = nn.ModuleList([Block(a) for _ in range(a.n_layer)])
        self.norm = nn.Parameter(torch.ones(C))
        self.lm_head = nn.Linear(C, a.vocab, bias=False)     # untied
        inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        freqs = torch.outer(torch.arange(a.seq_len, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)               # [T, hd], rotate_half layout
        # Constants as plain attributes, not buffers: DDP would broadcast buffers every step (and
        # gloo in torch 1.13 has no bool broadcast).
        self.cos, self.sin = emb.cos(), emb.sin()
        self.mask = torch.tril(torch.ones(a.seq_len, a.seq_len, dtype=torch.bool))
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * a.n_layer) if n.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for blk in self.h:
            x = blk(x, self.cos, self.sin, self.mask)
        logits = self.lm_head(rms_norm(x, self.norm, self.eps))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


# ----------------------------------------------------------------------------- run
def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def wrap(model, rank, world, a):
    """The model as the mode runs it (DDP, fully_shard, or itself); None when FSDP2 is unavailable."""
    if a.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model)
    if a.mode == "fsdp2":
        try:
            from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
            from torch.distributed.device_mesh import init_device_mesh
        except Exception as e:  # ImportError; torch 1.13 on Python 3.11 raises ValueError here
            if rank == 0:
                print(f"FSDP2_UNSUPPORTED torch {torch.__version__}: {type(e).__name__}: {e}", flush=True)
            return None
        kw = dict(mesh=init_device_mesh("cpu", (world,)),
                  mp_policy=MixedPrecisionPolicy(
                      param_dtype=torch.bfloat16 if a.fsdp2_param_dtype == "bf16" else torch.float32,
                      reduce_dtype=torch.float32),
                  reshard_after_forward=(a.fsdp2_reshard == "true"))
        for blk in model.h:
            fully_shard(blk, **kw)
        fully_shard(model, **kw)
    return model


def train(model, opt, rank, a, distributed):
    """Runs the steps; returns (step times in s, losses)."""
    import torch.distributed as dist
    g = torch.Generator().manual_seed(a.seed + 1000003 * rank)   # per-rank synthetic data
    times, losses = [], []
    for step in range(a.steps):
        data = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), generator=g)
        x, y = data[:, :-1], data[:, 1:]
        if distributed:
            dist.barrier()
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(a.autocast == "bf16")):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if rank == 0 and (step < 3 or step % 10 == 0 or step == a.steps - 1):
            print(f"step {step:3d} loss {losses[-1]:.4f} {1e3 * times[-1]:.1f} ms", flush=True)
    return times, losses


def mode_label(a):
    mode = a.mode
    if a.mode == "fsdp2":
        mode += "-" + a.fsdp2_param_dtype + ("" if a.fsdp2_reshard == "true" else "-noreshard")
    for on, tag in ((a.autocast == "bf16", "-autocast_bf16"), (a.sdpa, "-sdpa"), (a.compile, "-compile")):
        mode += tag if on else ""
    return mode


def report(allst, world, threads, nparams, losses, a):
    """Rank 0: prints RESULT/JSON lines and appends them to --json/--out."""
    med = max(s[0].item() for s in allst)            # slowest rank's median = step time
    tok_s = round(world * a.batch * a.seq_len / med, 1)
    res = dict(peer="torch-%s" % torch.__version__, model="llama", mode=a.mode, world=world, threads_per_rank=threads,
               n_layer=a.n_layer, n_head=a.n_head, n_kv_head=a.n_kv_head, n_embd=a.n_embd, ffn=a.ffn, vocab=a.vocab,
               seq_len=a.seq_len, batch_per_rank=a.batch, params=nparams, steps=a.steps, warmup=a.warmup,
               foreach=a.foreach, fused=a.fused, autocast=a.autocast, sdpa=a.sdpa, compile=a.compile,
               median_step_ms=round(1e3 * med, 2),
               min_step_ms=round(1e3 * min(s[1].item() for s in allst), 2),
               max_step_ms=round(1e3 * max(s[2].item() for s in allst), 2),
               tokens_per_s=tok_s,
               peak_rss_mib_per_rank=[round(s[3].item(), 1) for s in allst],
               first_loss=round(losses[0], 4), final_loss=round(losses[-1], 4))
    print("RESULT " + json.dumps(res), flush=True)
    comp = dict(impl="torch", version=torch.__version__, model="llama", mode=mode_label(a), ranks=world,
                threads=threads, step_ms=round(1e3 * med, 2), tokens_per_s=tok_s,
                loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
    print("JSON " + json.dumps(comp), flush=True)
    for path, rec in ((a.json, res), (a.out if a.out != "-" else "", comp)):
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(rec) + "\n")


def run(rank, world, a, launched_by_torchrun=False):
    import torch.distributed as dist
    threads = a.threads or max(1, (os.cpu_count() or 2) // world)
    torch.set_num_threads(threads)
    distributed = a.mode != "single"
    if distributed:
        if not launched_by_torchrun:
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group(a.backend, rank=rank, world_size=world)

    torch.manual_seed(a.seed)                      # identical init on every rank
    Block.SDPA = a.sdpa
    model = Llama(a)
    nparams = sum(p.numel() for p in model.parameters())
    model = wrap(model, rank, world, a)
    if model is None:
        dist.destroy_process_group()
        return
    if a.compile:
        model = torch.compile(model)
    kw = dict(lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    if a.fused:
        kw["fused"] = True
    elif a.foreach:
        kw["foreach"] = True
    opt = torch.optim.AdamW(model.parameters(), **kw)
    times, losses = train(model, opt, rank, a, distributed)

    meas = times[a.warmup:]
    stats = torch.tensor([statistics.median(meas), min(meas), max(meas), rss_mib()], dtype=torch.float64)
    allst = [stats]
    if distributed:
        allst = [torch.zeros_like(stats) for _ in range(world)]
        dist.all_gather(allst, stats)
    if rank == 0:
        report(allst, world, threads, nparams, losses, a)
    if distributed:
        dist.destroy_process_group()


def main():
    a = parse()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:      # torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a, launched_by_torchrun=True)
    elif a.mode == "single":
        run(0, 1, a)
    else:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(a.world, a), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
