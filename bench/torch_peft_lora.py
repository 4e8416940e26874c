#!/usr/bin/env python3
"""LoRA fine-tuning of a Hugging Face Llama directory with transformers + PEFT on the CPU, one
process: the PyTorch peer of zs_train's LoRA-on-an-int8-base runs (scripts/llama7b_lora.sh runs
both on the same directory, shape and tokens).

The base is loaded in bf16 (`from_pretrained(dir, torch_dtype=torch.bfloat16)`, the smallest
dtype PyTorch trains in on a CPU without bitsandbytes' CUDA kernels), LoRA r/alpha on q/k/v/o and
gate/up/down (zeroshard's qkv, proj, fc, fc_proj), gradient checkpointing on, AdamW over the
adapters (fp32 adapter weights, as PEFT keeps them), the loss in fp32. Tokens: random ids, or
--tokens FILE (an llm.c token shard: 256 int32 header, then uint16 tokens), cut into --batch
sequences of --context + 1.

Prints one "step" line per step and a final "RESULT {json}": median step time after the first
step, tokens/s, the process peak RSS (ru_maxrss, the kernel's VmHWM), the losses, the load time.
A failure to fit (MemoryError, a RuntimeError from the allocator) prints "RESULT {json}" with
"error" set and exits 0, so that the caller records it as the peer's outcome.

usage: torch_peft_lora.py DIR [--context 256] [--batch 2] [--steps 3] [--rank 8] [--alpha 8]
                          [--lr 1e-3] [--threads 2] [--tokens FILE] [--no-checkpointing]
"""
import argparse, json, os, resource, statistics, struct, sys, time


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_tokens(path, need):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        n = header[2]
        data = f.read(2 * min(n, need))
    return list(struct.unpack("<%dH" % (len(data) // 2), data))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tokens", default="")
    p.add_argument("--no-checkpointing", action="store_true")
    a = p.parse_args()

    import torch
    import transformers
    import peft

    torch.set_num_threads(a.threads)
    result = {"torch": torch.__version__, "transformers": transformers.__version__,
              "peft": peft.__version__, "threads": a.threads, "context": a.context,
              "batch": a.batch, "steps": a.steps, "rank": a.rank, "dtype": "bf16",
              "gradient_checkpointing": not a.no_checkpointing}
    try:
        t0 = time.time()
        model = transformers.AutoModelForCausalLM.from_pretrained(a.dir, torch_dtype=torch.bfloat16)
        result["load_s"] = round(time.time() - t0, 1)
        result["rss_after_load_bytes"] = peak_rss_bytes()
        if not a.no_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
        cfg = peft.LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0,
                              target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                              "up_proj", "down_proj"], task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, cfg)
        trainable = sum(t.numel() for t in model.parameters() if t.requires_grad)
        result["trainable_params"] = trainable
        opt = torch.optim.AdamW([t for t in model.parameters() if t.requires_grad], lr=a.lr)
        need = a.steps * a.batch * (a.context + 1)
        vocab = model.config.vocab_size
        if a.tokens:
            toks = load_tokens(a.tokens, need)
            while len(toks) < need:
                toks = toks + toks
        else:
            g = torch.Generator().manual_seed(0)
            toks = torch.randint(0, vocab, (need,), generator=g).tolist()
        toks = torch.tensor(toks[:need], dtype=torch.long).view(a.steps, a.batch, a.context + 1)
        times, losses = [], []
        model.train()
        for s in range(a.steps):
            t = time.time()
            x, y = toks[s, :, :-1], toks[s, :, 1:]
            logits = model(input_ids=x).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            dt = time.time() - t
            times.append(dt)
            losses.append(loss.item())
            print("step %d/%d | loss %.4f | %.1f s | %.1f tok/s" %
                  (s + 1, a.steps, losses[-1], dt, a.batch * a.context / dt), flush=True)
        timed = times[1:] if len(times) > 1 else times
        med = statistics.median(timed)
        result.update(step_s=round(med, 2), tokens_per_s=round(a.batch * a.context / med, 2),
                      losses=[round(l, 4) for l in losses], peak_rss_bytes=peak_rss_bytes())
    except (MemoryError, RuntimeError) as e:
        result.update(error=f"{type(e).__name__}: {str(e)[:300]}", peak_rss_bytes=peak_rss_bytes())
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
