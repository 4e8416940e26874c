#!/usr/bin/env python3
"""The table and the figure of scripts/zeropp_compare.sh (ZeRO++ on training, issue 29).

    python3 scripts/zeropp_report.py OUT NAME...

For each configuration NAME (the first is the reference: plain ZeRO-3) reads OUT/NAME.jsonl, a
zs_train --json-log file, and writes
  OUT/table.md          per configuration: the final validation loss and its difference from the
                        reference in %, the last step's training loss, the relative difference
                        of the gradient norm from the reference's at the same step (median and
                        largest over the steps), the bytes of one step within and between
                        nodes (all ranks, the final record's link counters) and the median step
                        time;
  OUT/zeropp_loss.png   training loss per step (mean over a trailing window, named in the plot)
                        and the validation losses (markers), one curve per configuration, with an
                        inset on the last 30% of the steps.
A log without a final record (a run still going) or a missing one is named so in the table; the
steps it has are drawn.
Exits 77 after writing the table when matplotlib is missing (Debian: python3-matplotlib).
"""
import os
import sys

from states_report import loss_cells, panel, read, write_report

LABELS = {"zero3": "ZeRO-3", "qwz": "+ qwZ", "hpz": "+ hpZ", "qgz": "+ qgZ",
          "zpp": "+ qwZ + hpZ + qgZ"}


def grad_norm_gap(run, ref):
    """'median (max)' of |gnorm / gnorm_ref - 1| in % over the steps both runs have, or '-'."""
    ref_by_step = {r["step"]: r.get("grad_norm") for r in ref[0]}
    gaps = sorted(abs(r["grad_norm"] / ref_by_step[r["step"]] - 1) for r in run[0]
                  if r.get("grad_norm") and ref_by_step.get(r["step"]))
    if run is ref or not gaps:
        return "-"
    return f"{100 * gaps[len(gaps) // 2]:.2f}% ({100 * gaps[-1]:.2f}%)"


def mb(final, key):
    """The final record's bytes KEY in MB (1e6), or '-'."""
    v = final.get(key) if final else None
    return "-" if v is None else f"{v / 1e6:.3f}"


def table(runs, names):
    """The markdown table of OUT/table.md; a run without a final record says where it stands."""
    lines = ["| configuration | final val loss | vs ZeRO-3 | last train loss | grad-norm gap "
             "vs ZeRO-3, median (max) | MB / step within nodes | MB / step between nodes | median step ms |",
             "|---|---|---|---|---|---|---|---|"]
    ref = runs[names[0]]
    for n in names:
        run = runs[n]
        steps, final = run
        val, vs = loss_cells(run, ref)
        last = f"{steps[-1]['loss']:.4f}" if steps and final else "-"
        gap = grad_norm_gap(run, ref)
        ms = f"{final['median_step_ms']:.1f}" if final else "-"
        lines.append(f"| {LABELS.get(n, n)} | {val} | {vs} | {last} | {gap} | "
                     f"{mb(final, 'comm_bytes_intra_all_ranks')} | "
                     f"{mb(final, 'comm_bytes_inter_all_ranks')} | {ms} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    out, names = sys.argv[1], sys.argv[2:]
    runs = {n: read(os.path.join(out, f"{n}.jsonl")) for n in names}
    world = next((r[1]["world_size"] for r in runs.values() if r[1]), "?")
    title = f"ZeRO++ against plain ZeRO-3: default GPT, bf16, {world} ranks"
    return write_report(out, table(runs, names), "zeropp_loss.png", [(panel, runs, names, title)],
                        (8, 5.5))


if __name__ == "__main__":
    sys.exit(main())
