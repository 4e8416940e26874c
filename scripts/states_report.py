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
A log without a final record (a run still going) or a missing one is named so in the table; the
steps it has are drawn.
Exits 77 after writing the table when matplotlib is missing (Debian: python3-matplotlib).
"""
import os
import sys

from plot_runs import load, series

RUNS = (("main", "default run: license text"), ("ft", "full fine-tuning: C++ code"))
STYLES = (("-", "o"), ("--", "s"), ("-.", "D"), (":", "^"), ("-", "v"))


def read(path):
    """Returns (step records, final record or None) of one log; ([], None) where it is missing."""
    if not os.path.exists(path):
        return [], None
    steps, finals, _ = load(path)
    return steps, (finals[-1] if finals else None)


def loss_cells(run, ref):
    """The validation loss of a run and its difference from the reference run, in %."""
    steps, final = run
    if final is None:
        return f"running (step {steps[-1]['step']})" if steps else "not run", ""
    v, r = final["val_loss"], ref[1]["val_loss"] if ref[1] else None
    if r is None:
        return f"{v:.4f}", ""
    return f"{v:.4f}", "reference" if run is ref else f"{100 * (v - r) / r:+.3f}%"


def table(runs, names):
    """The markdown table of OUT/table.md; a run without a final record says where it stands."""
    lines = ["| optimizer states | val loss, default run | vs fp32 | val loss, fine-tune (code) | "
             "vs fp32 | optimizer bytes / rank (vs fp32) | median step ms: default run, "
             "fine-tune |", "|---|---|---|---|---|---|---|"]
    ref = {k: runs[k][names[0]] for k, _ in RUNS}
    ref_opt = next((r[1]["memory_bytes"]["optimizer"] for r in ref.values() if r[1]), None)
    for n in names:
        finals = [runs[k][n][1] for k, _ in RUNS]
        cells = [c for k, _ in RUNS for c in loss_cells(runs[k][n], ref[k])]
        opt = sorted({f"{f['memory_bytes']['optimizer']:,.0f}" for f in finals if f})
        first = next((f["memory_bytes"]["optimizer"] for f in finals if f), None)
        ratio = f" ({first / ref_opt:.3f}x)" if first is not None and ref_opt else ""
        ms = ", ".join(f"{f['median_step_ms']:.1f}" if f else "-" for f in finals)
        lines.append(f"| {n} | {' | '.join(cells)} | {', '.join(opt) or '-'}{ratio} | {ms} |")
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
    last = max((r[0][-1]["step"] for r in runs.values() if r[0]), default=1)
    w = max(1, last // 60)
    inset = ax.inset_axes([0.42, 0.38, 0.55, 0.55])
    for i, (n, (ls, marker)) in enumerate(zip(names, STYLES)):
        steps = runs[n][0]
        if not steps:
            continue
        x, y = series(steps, "loss")
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


def write_report(out, text, png, panels, figsize):
    """Writes TEXT to OUT/table.md and prints it, then draws one panel per (draw, *args) of PANELS
    (draw(ax, *args)) side by side into OUT/PNG; returns 77 when matplotlib is missing, else 0."""
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{os.path.basename(sys.argv[0])}: SKIP: matplotlib is not installed "
              "(apt install python3-matplotlib)")
        return 77
    fig, axes = plt.subplots(1, len(panels), figsize=figsize, squeeze=False)
    for ax, (draw, *args) in zip(axes[0], panels):
        draw(ax, *args)
    fig.tight_layout()
    path = os.path.join(out, png)
    fig.savefig(path, dpi=90)
    print(path)
    return 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    out, names = sys.argv[1], sys.argv[2:]
    runs = {k: {n: read(os.path.join(out, f"{k}-{n}.jsonl")) for n in names} for k, _ in RUNS}
    panels = [(panel, runs[kind], names, title) for kind, title in RUNS]
    return write_report(out, table(runs, names), "states.png", panels, (13, 5))


if __name__ == "__main__":
    sys.exit(main())
