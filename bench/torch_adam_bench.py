#!/usr/bin/python3
"""A PyTorch AdamW step time on CPU over N fp32 params in one tensor, for bench_adam's
side-by-side table. --impl picks the optimizer:
  foreach   torch.optim.AdamW(foreach=True), fp32 states
  fused     torch.optim.AdamW(fused=True), fp32 states (PyTorch >= 2.4 on CPU)
  bnb8bit   bitsandbytes.optim.AdamW8bit, 8-bit block-wise states (block 256)
Prints one line: TORCH <version> <median_ms>, or SKIP <reason> when the optimizer does not run
here (exit status 0 either way). Run as bench_adam does (tcmalloc preloaded when installed):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
    /usr/bin/python3 bench/torch_adam_bench.py --n 67108864 --threads 2
"""
import argparse
import statistics
import time

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=64 << 20)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--iters", type=int, default=10)
ap.add_argument("--warmup", type=int, default=2)
ap.add_argument("--impl", choices=["foreach", "fused", "bnb8bit"], default="foreach")
a = ap.parse_args()


def make_optimizer(torch, p):
    kw = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if a.impl == "bnb8bit":
        import bitsandbytes as bnb
        return bnb.optim.AdamW8bit([p], **kw), "+bnb" + bnb.__version__
    if a.impl == "fused":
        return torch.optim.AdamW([p], fused=True, **kw), ""
    return torch.optim.AdamW([p], foreach=True, **kw), ""


try:
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    p = torch.nn.Parameter(0.02 * torch.randn(a.n))
    p.grad = 1e-3 * torch.randn_like(p)
    opt, tag = make_optimizer(torch, p)
    ts = []
    for i in range(a.warmup + a.iters):
        t0 = time.perf_counter()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            ts.append(dt)
except Exception as e:  # the row says why, as measured here
    print("SKIP %s: %s" % (type(e).__name__, str(e).splitlines()[0][:120] if str(e) else ""),
          flush=True)
else:
    print("TORCH %s%s %.3f" % (torch.__version__, tag, statistics.median(ts) * 1e3), flush=True)
