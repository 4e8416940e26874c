#!/usr/bin/env python3
"""Loads a Hugging Face directory the way its users will, AutoModelForCausalLM.from_pretrained(DIR,
torch_dtype=torch.bfloat16), and runs one forward pass: the check that an export of zs_train
(--export-hf, sharded at --export-shard-size) is a model transformers reads, at any size.

Prints one "RESULT {json}" line: the load time, the process peak RSS (ru_maxrss, the kernel's
VmHWM), the parameter count, the tensors of the directory's index or file, and whether the logits
of --tokens random ids are finite. With --against DIR2, also the names of DIR2's tensors (they
must be the same set) and, for --compare NAME (repeatable), the largest absolute difference of
that tensor between the two directories, read with safetensors one tensor at a time (so DIR2's
model is never loaded). Exits 1 when a check fails.

Needs torch >= 2, transformers and safetensors (not a dependency of zeroshard: a peer check).
usage: hf_load_check.py DIR [--tokens 16] [--threads 2] [--against DIR2] [--compare NAME]...
"""
import argparse, json, os, resource, sys, time


def tensor_files(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        return {name: os.path.join(d, file) for name, file in wm.items()}
    from safetensors import safe_open
    path = os.path.join(d, "model.safetensors")
    with safe_open(path, "pt") as f:
        return {name: path for name in f.keys()}


def read_tensor(files, name):
    from safetensors import safe_open
    with safe_open(files[name], "pt") as f:
        return f.get_tensor(name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--against")
    p.add_argument("--compare", action="append", default=[])
    a = p.parse_args()
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(a.threads)
    result = {"dir": a.dir}
    ok = True
    t0 = time.time()
    model = AutoModelForCausalLM.from_pretrained(a.dir, torch_dtype=torch.bfloat16)
    result["load_s"] = round(time.time() - t0, 1)
    result["class"] = type(model).__name__
    result["params"] = sum(t.numel() for t in model.parameters())
    files = tensor_files(a.dir)
    result["tensors"] = len(files)
    result["files"] = len(set(files.values()))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (1, a.tokens), generator=g)
    with torch.no_grad():
        logits = model(ids).logits.float()
    result["logits_finite"] = bool(torch.isfinite(logits).all())
    result["logits_abs_mean"] = round(float(logits.abs().mean()), 4)
    ok = ok and result["logits_finite"]
    del model
    if a.against:
        other = tensor_files(a.against)
        result["same_tensor_names"] = set(other) == set(files)
        ok = ok and result["same_tensor_names"]
        diffs = {}
        for name in a.compare:
            x = read_tensor(files, name).float()
            y = read_tensor(other, name).float()
            diffs[name] = float((x - y).abs().max()) if x.shape == y.shape else "shape differs"
        if diffs:
            result["max_abs_diff"] = diffs
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
                                  2)
    result["ok"] = ok
    print("RESULT " + json.dumps(result))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
