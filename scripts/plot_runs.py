#!/usr/bin/env python3
"""Plots zs_train JSON logs (--json-log) as PNG files, one curve per log, labelled by file name.

    python3 scripts/plot_runs.py run_a.jsonl run_b.jsonl --out plots/

Writes into --out (default: plots):
  loss.png        training loss per step (solid) and validation loss (dots, dashed)
  tokens_per_s.png  tokens/s over all ranks per step
  memory.png      rank 0's peak tracked memory per step; per-category peaks (max over ranks)
                  from each run's final record
  comm.png        bytes sent by rank 0 per step
A log written by a run that was resumed (--json-log-mode append) holds several headers; its
steps are plotted as one curve. Logs from before the header existed (no "type" keys) also work.
Needs matplotlib (Debian: python3-matplotlib); exits 77 without it.
"""
import argparse
import json
import os
import sys


def load(path):
    """Returns (steps, finals, headers) of one log: lists of dicts."""
    steps, finals, headers = [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_runs: {path}:{n}: not JSON: {e}")
            kind = r.get("type") or ("final" if r.get("final") else "step")
            {"step": steps, "final": finals, "header": headers}.get(kind, []).append(r)
    # A resumed run repeats the steps after its checkpoint: keep the latest record of each step.
    by_step = {r["step"]: r for r in steps if "step" in r}
    return [by_step[s] for s in sorted(by_step)], finals, headers


def series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+", help="zs_train --json-log files")
    ap.add_argument("--out", default="plots", help="output directory (created)")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_runs: SKIP: matplotlib is not installed (apt install python3-matplotlib)")
        return 77

    runs = []
    for path in args.logs:
        steps, finals, headers = load(path)
        if not steps:
            sys.exit(f"plot_runs: {path}: no step records")
        runs.append((os.path.basename(path), steps, finals, headers))
    os.makedirs(args.out, exist_ok=True)
    written = []

    def save(fig, name):
        p = os.path.join(args.out, name)
        fig.tight_layout()
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, steps, _, _ in runs:
        x, y = series(steps, "loss")
        line = ax.plot(x, y, label=f"{label} train")[0]
        vx, vy = series(steps, "val_loss")
        if vx:
            ax.plot(vx, vy, "o--", color=line.get_color(), label=f"{label} val")
    ax.set(xlabel="step", ylabel="loss", title="loss")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, "loss.png")

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, steps, _, _ in runs:
        ax.plot(*series(steps, "tokens_per_s"), label=label)
    ax.set(xlabel="step", ylabel="tokens/s (all ranks)", title="throughput")
    ax.legend()
    ax.grid(alpha=0.3)
    save(fig, "tokens_per_s.png")

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5))
    for label, steps, _, _ in runs:
        x, y = series(steps, "mem_peak_bytes")
        if x:
            ax.plot(x, [v / 2**20 for v in y], label=label)
    ax.set(xlabel="step", ylabel="MiB", title="rank 0 peak tracked memory")
    ax.grid(alpha=0.3)
    cats = []
    for _, _, finals, _ in runs:
        for k in (finals[-1].get("memory_bytes", {}) if finals else {}):
            if k != "total" and k not in cats:
                cats.append(k)
    width = 0.8 / max(1, len(runs))
    for i, (label, _, finals, _) in enumerate(runs):
        mem = finals[-1].get("memory_bytes", {}) if finals else {}
        bx.bar([c + i * width for c in range(len(cats))],
               [mem.get(k, 0) / 2**20 for k in cats], width, label=label)
    bx.set_xticks([c + 0.4 - width / 2 for c in range(len(cats))])
    bx.set_xticklabels(cats, rotation=30, ha="right")
    bx.set(ylabel="MiB", title="peak per category (max over ranks)")
    for a in (ax, bx):
        if a.get_legend_handles_labels()[0]:
            a.legend()
    save(fig, "memory.png")

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, steps, _, _ in runs:
        x, y = series(steps, "comm_bytes")
        if x:
            ax.plot(x, [v / 2**20 for v in y], label=label)
    ax.set(xlabel="step", ylabel="MiB sent by rank 0", title="communication per step")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    ax.grid(alpha=0.3)
    save(fig, "comm.png")

    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
