#!/usr/bin/python3
"""torch.optim.AdamW(foreach=True) step time on CPU over N fp32 params in one tensor, for
bench_adam's side-by-side table. Prints one line: TORCH <version> <median_ms>.
Run as bench_adam does (tcmalloc preloaded: torch's best configuration here):
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
    /usr/bin/python3 bench/torch_adam_bench.py --n 67108864 --threads 2
"""
import argparse
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=64 << 20)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--iters", type=int, default=10)
ap.add_argument("--warmup", type=int, default=2)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
p = torch.nn.Parameter(0.02 * torch.randn(a.n))
p.grad = 1e-3 * torch.randn_like(p)
opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=True)
ts = []
for i in range(a.warmup + a.iters):
    t0 = time.perf_counter()
    opt.step()
    dt = time.perf_counter() - t0
    if i >= a.warmup:
        ts.append(dt)
print("TORCH %s %.3f" % (torch.__version__, statistics.median(ts) * 1e3), flush=True)
