#!/usr/bin/env python3
"""A full fine-tune of a randomly initialised transformers LlamaForCausalLM on the CPU, one
process: the PyTorch peer of zs_train's full fine-tunes at real size (scripts/llama1b_full.sh).

The model is built from a config (Llama-3.2-1B's by default: 16 layers, width 2048, 32 heads / 8
KV heads, FFN 8192, vocab 128256, tied embeddings, rope theta 500000 with llama3 scaling), fp32
weights (PyTorch's AdamW keeps fp32 master weights and states whatever the compute dtype),
gradient checkpointing on, AdamW(fused=True), compute in fp32 or under bf16 autocast. Tokens:
random ids, --batch sequences of --context + 1.

Prints "step" lines and a final "RESULT {json}": median step time after the first, tokens/s,
the process peak RSS (ru_maxrss) and the losses; an allocation failure (run it under a memory
limit, e.g. prlimit --data) prints the RESULT with "error" and the peak so far, and exits 0.

With --fsdp2 it is one rank of FSDP2 (torch.distributed.fsdp.fully_shard on each decoder layer
and on the root, CPU, gloo), launched by torchrun (`python -m torch.distributed.run
--nproc_per_node 2 torch_full_ft.py --fsdp2 ...`): each rank builds the whole fp32 model, then
shards it; --batch sequences per rank; the RESULT (rank 0's) carries every rank's peak RSS. A
rank whose allocation fails prints its RESULT and exits 1, so that torchrun ends the others.

usage: torch_full_ft.py [--layers 16] [--context 512] [--batch 1] [--steps 3] [--autocast bf16]
                        [--threads 2] [--fsdp2]
"""
import argparse, json, os, resource, statistics, sys, time


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--autocast", choices=["none", "bf16"], default="none")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--fsdp2", action="store_true")
    a = p.parse_args()

    import torch
    import transformers

    torch.set_num_threads(a.threads)
    rank, world = 0, 1
    if a.fsdp2:
        import datetime
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
        rank, world = dist.get_rank(), dist.get_world_size()
    result = {"torch": torch.__version__, "transformers": transformers.__version__,
              "threads": a.threads, "layers": a.layers, "context": a.context, "batch": a.batch,
              "autocast": a.autocast, "optimizer": "AdamW(fused=True)",
              "mode": f"FSDP2 over {world} ranks (gloo)" if a.fsdp2 else "one process"}
    failed = False
    try:
        cfg = transformers.LlamaConfig(
            vocab_size=128256, hidden_size=2048, intermediate_size=8192,
            num_hidden_layers=a.layers, num_attention_heads=32, num_key_value_heads=8,
            max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
            tie_word_embeddings=True)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        result["params"] = sum(t.numel() for t in model.parameters())
        if a.fsdp2:
            from torch.distributed.fsdp import fully_shard
            for layer in model.model.layers:
                fully_shard(layer)
            fully_shard(model)
        try:
            opt = torch.optim.AdamW(model.parameters(), lr=a.lr, fused=True)
        except (RuntimeError, TypeError) as e:  # fused may not take DTensors here
            opt = torch.optim.AdamW(model.parameters(), lr=a.lr, foreach=True)
            result["optimizer"] = f"AdamW(foreach=True) (fused refused: {str(e)[:80]})"
        g = torch.Generator().manual_seed(1)
        toks = torch.randint(0, cfg.vocab_size, (a.steps, a.batch, a.context + 1), generator=g)
        times, losses = [], []
        for s in range(a.steps):
            t = time.time()
            x, y = toks[s, :, :-1], toks[s, :, 1:]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
                logits = model(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, cfg.vocab_size),
                                                     y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            dt = time.time() - t
            times.append(dt)
            losses.append(loss.item())
            if rank == 0:
                print("step %d/%d | loss %.4f | %.1f s | %.1f tok/s | peak RSS %.2f GiB" %
                      (s + 1, a.steps, losses[-1], dt, world * a.batch * a.context / dt,
                       peak_rss_bytes() / 2**30), flush=True)
        med = statistics.median(times[1:] if len(times) > 1 else times)
        result.update(step_s=round(med, 2),
                      tokens_per_s=round(world * a.batch * a.context / med, 2),
                      losses=[round(l, 4) for l in losses], peak_rss_bytes=peak_rss_bytes())
    except (MemoryError, RuntimeError) as e:
        failed = True
        result.update(error=f"rank {rank}: {type(e).__name__}: {str(e)[:300]}",
                      peak_rss_bytes=peak_rss_bytes())
    if a.fsdp2 and not failed:
        import torch.distributed as dist
        peaks = [None] * world
        dist.all_gather_object(peaks, peak_rss_bytes())
        result["peak_rss_bytes_per_rank"] = peaks
    if rank == 0 or failed:
        print("RESULT " + json.dumps(result), flush=True)
    if failed and a.fsdp2:
        sys.exit(1)


if __name__ == "__main__":
    main()
