#!/usr/bin/env python3
"""The table and the figure of scripts/states_compare.sh (narrow optimizer states, issue 28).

    python3 scripts/states_report.py OUT NAME...

For each state configuration NAME (the first is the reference: fp32 states) reads
OUT/main-NAME.jsonl (the default zs_train run) and OUT/ft-NAME.jsonl (full fine-tuning on the
code text), both zs_train --json-log files, and writes
  OUT/table.md    per configuration: the final validation loss of both runs and its difference
                  from the reference in %, the tracked optimizer bytes per rank (the final
                  record's "optimizer" category, max over ranks) and the median step time;
  OUT/states.png  one panel per run: training loss per step (mean over a trailing window, named
                  in the panel) and the validation losses (markers), one curve per configuration,
                  with an inset on the last 30% of the steps.
Exits 77 after writing the table when matplotlib is missing (Debian: python3-matplotlib).
"""
import os
import sys

from plot_runs import load, series

RUNS = (("main", "default run: license text"), ("ft", "full fine-tuning: C++ code"))
STYLES = (("-", "o"), ("--", "s"), ("-.", "D"), (":", "^"))


def read(path):
    """Returns (step records, final record) of one log."""
    steps, finals, _ = load(path)
    if not steps or not finals:
        sys.exit(f"states_report: {path}: no step or no final record")
    return steps, finals[-1]


def pct(value, ref):
    return "reference" if value == ref else f"{100 * (value - ref) / ref:+.3f}%"


def table(runs, names):
    """The markdown table of OUT/table.md."""
    lines = ["| optimizer states | val loss, default run | vs fp32 | val loss, fine-tune (code) | "
             "vs fp32 | optimizer bytes / rank (vs fp32) | median step ms: default run, "
             "fine-tune |", "|---|---|---|---|---|---|---|"]
    ref = {k: runs[k][names[0]][1] for k, _ in RUNS}
    for n in names:
        main, ft = runs["main"][n][1], runs["ft"][n][1]
        opt = [r["memory_bytes"]["optimizer"] for r in (main, ft)]
        ref_opt = ref["main"]["memory_bytes"]["optimizer"]
        opt_text = f"{opt[0]:,.0f}" if opt[0] == opt[1] else f"{opt[0]:,.0f}, {opt[1]:,.0f}"
        lines.append(
            f"| {n} | {main['val_loss']:.4f} | {pct(main['val_loss'], ref['main']['val_loss'])} "
            f"| {ft['val_loss']:.4f} | {pct(ft['val_loss'], ref['ft']['val_loss'])} "
            f"| {opt_text} ({opt[0] / ref_opt:.3f}x) "
            f"| {main['median_step_ms']:.1f}, {ft['median_step_ms']:.1f} |")
    return "\n".join(lines) + "\n"


def smooth(y, w):
    """Mean of the last w values at each point (fewer at the start)."""
    out, acc = [], 0.0
    for i, v in enumerate(y):
        acc += v - (y[i - w] if i >= w else 0.0)
        out.append(acc / min(i + 1, w))
    return out


def panel(ax, runs, names, title):
    """Draws one run kind's curves on ax, with an inset on the last 30% of the steps."""
    last = max(r[0][-1]["step"] for r in runs.values())
    inset = ax.inset_axes([0.42, 0.38, 0.55, 0.55])
    for i, (n, (ls, marker)) in enumerate(zip(names, STYLES)):
        steps = runs[n][0]
        x, y = series(steps, "loss")
        w = max(1, len(x) // 60)
        ys = smooth(y, w)
        vx, vy = series(steps, "val_loss")
        for a, lo in ((ax, 0), (inset, 0.7 * last)):
            main = a is ax
            a.plot([s for s in x if s >= lo], [v for s, v in zip(x, ys) if s >= lo], ls=ls,
                   lw=1.2, color=f"C{i}", label=f"{n} train" if main else None)
            a.plot([s for s in vx if s >= lo], [v for s, v in zip(vx, vy) if s >= lo], marker,
                   color=f"C{i}", ms=5, mfc="none", label=f"{n} val" if main else None)
    train = "per step" if w == 1 else f"mean of the last {w} steps"
    ax.set(xlabel="step", ylabel="loss", title=f"{title}\n(train: {train}; markers: validation)")
    ax.grid(alpha=0.3)
    inset.grid(alpha=0.3)
    inset.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower left", ncol=2)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    out, names = sys.argv[1], sys.argv[2:]
    runs = {k: {n: read(os.path.join(out, f"{k}-{n}.jsonl")) for n in names} for k, _ in RUNS}
    text = table(runs, names)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("states_report: SKIP: matplotlib is not installed (apt install python3-matplotlib)")
        return 77
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, (kind, title) in zip(axes, RUNS):
        panel(ax, runs[kind], names, title)
    fig.tight_layout()
    path = os.path.join(out, "states.png")
    fig.savefig(path, dpi=90)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
