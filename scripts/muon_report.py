#!/usr/bin/env python3
"""The tables and the figure of scripts/muon_quality.sh (AdamW against Muon + AdamW).

    python3 scripts/muon_report.py OUT --models default llama --lrs 1e-3 2e-3 4e-3

Reads OUT/MODEL-OPTIMIZER-lrLR.jsonl (zs_train --json-log files; OPTIMIZER adamw and muon) and
writes
  OUT/table.md          per model, one row per optimizer: the final validation loss at every
                        learning rate (the best in bold), and at the best one the validation loss
                        at the validated steps nearest a quarter, half, three quarters and all of
                        the steps, the lowest validation loss and its step, and the first
                        validated step whose loss is at or below AdamW's best final validation
                        loss ("not reached" if none; AdamW's own row names the first step at its
                        final loss);
  OUT/muon_quality.png  one panel per model: validation loss per step at each optimizer's best
                        learning rate (the other rates thin and dashed), AdamW's best final loss
                        as a dotted line, with an inset on the second half of the steps.
A run without a final record (still going, or failed) or a missing log is named so in the table
and left out of the choice of the best learning rate; the steps it has are drawn.
Exits 77 after writing the table when matplotlib is missing (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys

from plot_runs import series
from states_report import read, write_report

OPTIMIZERS = (("adamw", "AdamW"), ("muon", "Muon + AdamW"))
TITLES = {"default": "default run", "llama": "Llama-shaped token run"}


def describe(model, runs):
    """One line on the model and data of MODEL's runs, from the first log's header."""
    for path in runs:
        if os.path.exists(path):
            with open(path) as f:
                h = json.loads(f.readline())
            break
    else:
        return TITLES.get(model, model)
    c = h.get("config", {})
    kv = f" over {c['kv-heads']} KV heads" if c.get("kv-heads") else ""
    data = ("BPE token shards, vocabulary " + str(c["vocab"]) if c.get("train-shards")
            else "bytes of " + os.path.basename(c.get("data") or "the shipped corpus"))
    family = {"gpt2": "GPT-2", "llama": "Llama", "qwen3": "Qwen3"}.get(c.get("family"),
                                                                      c.get("family"))
    return (f"{TITLES.get(model, model)}: {family} family, {c.get('layers')} layers, width "
            f"{c.get('width')}, {c.get('heads')} heads{kv}, context {c.get('context')}, "
            f"{h.get('params', 0):,} parameters, {c.get('batch')} sequences per rank x "
            f"{h.get('world_size')} ranks; {data}; {c.get('steps')} steps, validated every "
            f"{c.get('eval-every')}")


def first_at_or_below(points, target):
    """The first step of (steps, values) whose value is at or below target, or None."""
    return next((s for s, v in zip(*points) if v <= target + 1e-12), None)


def model_table(model, lrs, runs):
    """The markdown of one model: a title line and its table. runs[opt][lr] = (steps, final)."""
    best = {}
    for opt, _ in OPTIMIZERS:
        done = [(runs[opt][lr][1]["val_loss"], lr) for lr in lrs if runs[opt][lr][1]]
        if done:
            best[opt] = min(done)[1]
    ref = runs["adamw"][best["adamw"]] if "adamw" in best else None
    target = ref[1]["val_loss"] if ref else None
    val = {opt: series(runs[opt][best[opt]][0], "val_loss") for opt in best}
    # The checkpoints: the validated steps nearest a quarter, half, three quarters and the end.
    vsteps = sorted(set().union(*(v[0] for v in val.values()))) if val else []
    checks = []
    if vsteps:
        last = vsteps[-1]
        for q in (0.25, 0.5, 0.75, 1.0):
            s = min(vsteps, key=lambda x: abs(x - q * last))
            if s not in checks:
                checks.append(s)
    head = ["optimizer"] + [f"final val loss, lr {lr}" for lr in lrs] + ["best lr"]
    head += [f"val loss at step {s}" for s in checks]
    head.append("lowest val loss (step)")
    head.append("first step at or below AdamW's best final"
                + (f" ({target:.4f})" if target is not None else ""))
    lines = [f"**{describe(model, [r for o in runs for r in runs[o]['paths']])}**", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for opt, label in OPTIMIZERS:
        cells = [label]
        for lr in lrs:
            steps, final = runs[opt][lr]
            if final is None:
                cells.append(f"running (step {steps[-1]['step']})" if steps else "not run")
            else:
                v = f"{final['val_loss']:.4f}"
                cells.append(f"**{v}**" if best.get(opt) == lr else v)
        cells.append(best.get(opt, "-"))
        if opt in best:
            by_step = dict(zip(*val[opt]))
            cells += [f"{by_step[s]:.4f}" if s in by_step else "-" for s in checks]
            low = min(zip(val[opt][1], val[opt][0]))
            cells.append(f"{low[0]:.4f} ({low[1]})")
            at = first_at_or_below(val[opt], target) if target is not None else None
            last = runs[opt][best[opt]][1]["steps"]
            cells.append("not reached" if at is None else f"{at} of {last}")
        else:
            cells += ["-"] * (len(checks) + 2)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n", best, target


def panel(ax, title, lrs, runs, best, target):
    """Validation loss per step of one model: best rates bold, the others thin and dashed."""
    last = max((r[0][-1]["step"] for o in runs for lr in lrs for r in [runs[o][lr]] if r[0]),
               default=1)
    inset = ax.inset_axes([0.40, 0.40, 0.57, 0.50])
    for i, (opt, label) in enumerate(OPTIMIZERS):
        for lr in lrs:
            x, y = series(runs[opt][lr][0], "val_loss")
            if not x:
                continue
            top = best.get(opt) == lr
            style = dict(color=f"C{i}", lw=1.8 if top else 0.8, ls="-" if top else "--",
                         alpha=1.0 if top else 0.45, marker="o" if top else None, ms=3.5)
            ax.plot(x, y, label=f"{label}, lr {lr}" + (" (best)" if top else ""), **style)
            h = [(s, v) for s, v in zip(x, y) if s >= 0.5 * last]
            if h:
                inset.plot(*zip(*h), **style)
    if target is not None:
        for a in (ax, inset):
            a.axhline(target, color="0.3", ls=":", lw=1,
                      label=f"AdamW's best final {target:.4f}" if a is ax else None)
    ax.set(xlabel="step", ylabel="validation loss", title=title)
    ax.grid(alpha=0.3)
    inset.grid(alpha=0.3)
    inset.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower left")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder of scripts/muon_quality.sh's logs")
    ap.add_argument("--models", nargs="+", default=["default", "llama"])
    ap.add_argument("--lrs", nargs="+", default=["1e-3", "2e-3", "4e-3"])
    a = ap.parse_args()
    text, panels = [], []
    for m in a.models:
        runs = {}
        for opt, _ in OPTIMIZERS:
            paths = [os.path.join(a.out, f"{m}-{opt}-lr{lr}.jsonl") for lr in a.lrs]
            runs[opt] = {lr: read(p) for lr, p in zip(a.lrs, paths)}
            runs[opt]["paths"] = paths
        md, best, target = model_table(m, a.lrs, runs)
        text.append(md)
        panels.append((panel, TITLES.get(m, m), a.lrs, runs, best, target))
    return write_report(a.out, "\n".join(text), "muon_quality.png", panels,
                        (6.5 * len(panels), 4.8))


if __name__ == "__main__":
    sys.exit(main())
