#!/usr/bin/env python3
"""Writes the report of scripts/scaling_experiment.sh from its output directory.

    python3 scripts/scaling_report.py OUT_DIR [--check-bytes TOL]

Reads OUT_DIR/manifest.jsonl and OUT_DIR/runs/ (each configuration's two zs_train logs and
interface counters, and zs_plan's prediction) and writes:
  OUT_DIR/report.md     the table: step time, tokens/s, inter-node bytes per step (the model's
                        formulas, the interface counters, zs_train's link counters), predicted vs
                        measured communication time, and the rows that disagree beyond 25%
  OUT_DIR/report.json   the same rows as data
  OUT_DIR/*.png         plots (matplotlib; without it the plots are skipped with a message)
Method: see scripts/scaling_experiment.sh's header and docs/scaling.md.
--check-bytes TOL: exit 1 when a configuration's inter-node bytes per step by the interface
counters differ from the model's by more than TOL (relative), when zs_train's link counters
(intra and inter) differ from the model's figure for them at all, or when a run failed (the CI
smoke).

    scaling_report.py --plan-args < flags   (one zs_train flag or value per line)
prints the zs_plan flags that describe the same GPT (used by the experiment script).
"""
import json
import os
import sys

PLAN_FLAGS = ("--layers", "--width", "--heads", "--context", "--dtype", "--grad-dtype",
              "--gradient-accumulation-steps")
CONFIG_LABELS = {"zero2": "ZeRO-2 flat", "zero3": "ZeRO-3 flat", "hier3": "ZeRO-3 hierarchical",
                 "hsdp3": "ZeRO-3 HSDP (shard group = node)", "qwz3": "ZeRO-3 + qwZ",
                 "hpz3": "ZeRO-3 + hpZ", "qgz3": "ZeRO-3 + qgZ", "zpp3": "ZeRO-3 + qwZ + hpZ + qgZ"}
ZEROPP = ("qwz3", "hpz3", "qgz3", "zpp3", "hsdp3")


def plan_args(lines):
    words = [w.strip() for w in lines if w.strip()]
    out = ["--vocab", "256"]  # zs_train's byte-level vocabulary (models/gpt/gpt_architecture.h)
    for i, w in enumerate(words):
        if w in PLAN_FLAGS and i + 1 < len(words):
            out += [w, words[i + 1]]
    return " ".join(out)


def read_jsonl(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


def final_record(path):
    for r in reversed(read_jsonl(path)):
        if r.get("type") == "final" or r.get("final"):
            return r
    raise ValueError(f"{path}: no final record")


def node_sent(counters):
    """Bytes all nodes sent between `before` and `after` (rx of the bridge ports zsvK)."""
    b, a = counters["before"], counters["after"]
    return sum(a[k]["node_sent"] - b[k]["node_sent"] for k in a)


def load_run(out, name, steps, base):
    runs = os.path.join(out, "runs")
    long_c = json.load(open(os.path.join(runs, f"{name}.s{steps}.counters.json")))
    short_c = json.load(open(os.path.join(runs, f"{name}.s{base}.counters.json")))
    fin = final_record(os.path.join(runs, f"{name}.s{steps}.jsonl"))
    return {
        "iface_inter_per_step": (node_sent(long_c) - node_sent(short_c)) / (steps - base),
        "iface_inter_run_long": node_sent(long_c),
        "median_step_ms": fin["median_step_ms"],
        "median_tokens_per_s": fin["median_tokens_per_s"],
        "log_inter_all_ranks": fin.get("comm_bytes_inter_all_ranks"),
        "log_intra_all_ranks": fin.get("comm_bytes_intra_all_ranks"),
        "log_bytes_per_rank_max": fin.get("comm_bytes_per_step"),
        "param_hash": fin.get("param_hash"),
    }


def rel(a, b):
    return (a - b) / b if b else float("nan")


def build_rows(out):
    """Returns (rows, references): measured configurations and reference runs, as dicts."""
    manifest = read_jsonl(os.path.join(out, "manifest.jsonl"))
    if not manifest:
        raise ValueError("empty manifest")
    steps, base = manifest[0]["steps"], manifest[0]["base_steps"]
    every = {}
    for m in manifest:
        row = dict(m)
        row["label"] = CONFIG_LABELS.get(m["config"], m["config"])
        row["ranks"] = m["nodes"] * m["ranks_per_node"]
        row["layout"] = f"{m['nodes']}x{m['ranks_per_node']}"
        if not m["ok"]:
            row["error"] = "a run failed"
        else:
            row.update(load_run(out, m["name"], steps, base))
            plan = json.load(open(os.path.join(out, "runs", m["name"] + ".plan.json")))
            c = plan["communication"]
            row["model_inter_all_ranks"] = c["inter_bytes_all_ranks"]
            row["model_intra_all_ranks"] = c["intra_bytes_all_ranks"]
            row["model_counted_inter_all_ranks"] = c["counted_inter_bytes_all_ranks"]
            row["model_counted_intra_all_ranks"] = c["counted_intra_bytes_all_ranks"]
            row["predicted_comm_ms"] = c.get("time_s", float("nan")) * 1e3
            row["predicted_overlappable_ms"] = c.get("overlappable_s", float("nan")) * 1e3
            row["iface_vs_model"] = rel(row["iface_inter_per_step"], row["model_inter_all_ranks"])
            row["log_vs_model_counted"] = (
                rel(row["log_inter_all_ranks"], row["model_counted_inter_all_ranks"])
                if row["log_inter_all_ranks"] is not None else float("nan"))
        every[m["name"]] = row
    refs = [r for r in every.values() if r["role"] in ("compute", "reference")]
    rows = []
    for r in every.values():
        if r in refs:
            continue
        ref = every.get(r["role"])
        r["reference"] = r["role"]
        r["measured_comm_ms"] = float("nan")
        if "error" in r:
            pass
        elif r["nodes"] == 1:
            r["reference"] = "(one node: its own reference)"
        elif ref is None or "error" in ref:
            r["reference"] = "(reference missing or failed)"
        else:
            # The reference runs the same flags on one node: what it spends beyond the model's
            # node-local communication is compute and core sharing, which this run pays too.
            r["reference_step_ms"] = ref["median_step_ms"]
            r["measured_comm_ms"] = (r["median_step_ms"] - ref["median_step_ms"] +
                                     ref["predicted_comm_ms"])
            # The model's lower bound: what the engine issues asynchronously hidden behind the
            # compute (the reference's step less its own predicted communication), as far as
            # there is compute to hide it behind.
            compute = max(0.0, ref["median_step_ms"] - ref["predicted_comm_ms"])
            r["predicted_comm_hidden_ms"] = r["predicted_comm_ms"] - min(
                r["predicted_overlappable_ms"], compute)
        rows.append(r)
    return rows, refs


def fmt_b(v):
    return "-" if v is None else f"{v / 1e6:.3f}"


def ratio_of(r):
    m = r.get("measured_comm_ms", float("nan"))
    return r["predicted_comm_ms"] / m if m == m and m > 0 else float("nan")


def outside(r):
    """Whether the measured comm is more than 25% outside [hidden, serialized] predictions."""
    m = r.get("measured_comm_ms", float("nan"))
    if m != m:
        return False
    return m < 0.75 * r["predicted_comm_hidden_ms"] or m > 1.25 * r["predicted_comm_ms"]


def write_markdown(out, rows, refs):
    lines = ["# Scaling experiment", "",
             "Bytes in MB (1e6) per step, all ranks together, across nodes. `model` = "
             "planner/comm_model.h (what the algorithms send), `iface` = the interface counters "
             "(Ethernet/IP/TCP headers and ACKs included; difference of two run lengths), `log` "
             "= zs_train's link counters (the ring bound for flat collectives), `counted` = the "
             "model's figure for those counters. Comm ms: predicted = alpha-beta, every call "
             "serialized, and `hidden` = the same less the asynchronous share the engine could "
             "hide behind compute (at most the reference's compute time); measured = median step - the reference's median step + the "
             "reference's predicted (node-local) communication, the reference being the same "
             "flags on one node of as many ranks.", "",
             "| config | layout | rate | step ms | tok/s | model MB | iface MB | iface/model | "
             "log MB | counted MB | pred comm ms | hidden | meas comm ms | pred/meas |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    off = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | {r['layout']} | {r['rate']} | {r['error']} |" +
                         " |" * 9)
            continue
        ratio = ratio_of(r)
        ivm = (f"{1 + r['iface_vs_model']:.3f}" if r["model_inter_all_ranks"] else "-")
        meas = r["measured_comm_ms"]
        lines.append(
            f"| {r['label']} | {r['layout']} | {r['rate']} | {r['median_step_ms']:.1f} | "
            f"{r['median_tokens_per_s']:.0f} | {fmt_b(r['model_inter_all_ranks'])} | "
            f"{fmt_b(r['iface_inter_per_step'])} | {ivm} | "
            f"{fmt_b(r['log_inter_all_ranks'])} | {fmt_b(r['model_counted_inter_all_ranks'])} | "
            f"{r['predicted_comm_ms']:.1f} | "
            f"{'-' if meas != meas else format(r['predicted_comm_hidden_ms'], '.1f')} | ")
        lines[-1] += (f"{'-' if meas != meas else f'{meas:.1f}'} | "
                      f"{'-' if ratio != ratio else f'{ratio:.2f}'} |")
        if outside(r):
            off.append(f"- {r['label']} {r['layout']} {r['rate']}: predicted "
                       f"{r['predicted_comm_hidden_ms']:.1f}-{r['predicted_comm_ms']:.1f} ms, "
                       f"measured {meas:.1f} ms (serialized/measured {ratio:.2f})")
    lines += ["", "## Measured communication more than 25% outside the predicted range", ""]
    lines += off if off else ["(none)"]
    lines += ["", "## References (one node, no inter-node link)", "",
              "| name | flags' config | ranks | step ms | tok/s | pred comm ms (node-local) |",
              "|---|---|---|---|---|---|"]
    for r in refs:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['label']} | {r['ranks']} | {r['error']} | | |")
            continue
        lines.append(f"| {r['name']} | {r['label']} | {r['ranks']} | {r['median_step_ms']:.1f} | "
                     f"{r['median_tokens_per_s']:.0f} | {r['predicted_comm_ms']:.2f} |")
    lines += zeropp_section(rows)
    lines += hash_section(rows, refs)
    lines += ["", "Plots: step_time.png, tokens_per_s.png, inter_bytes.png, comm_time.png", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))


def hash_section(rows, refs):
    """Every run's final param_hash (the long run), and whether they agree: with zs_train's
    --world-invariant --global-micro-batches M among the model flags every layout computes the
    same step (docs/engine.md, "World-invariant mode"), so one hash is expected."""
    runs = [r for r in refs + rows if "error" not in r and r.get("param_hash")]
    if not runs:
        return []
    hashes = sorted({r["param_hash"] for r in runs})
    lines = ["", "## Final parameters", "",
             f"{len(runs)} runs, {len(hashes)} distinct final param_hash"
             + (" (every layout computed the same parameters)" if len(hashes) == 1 else "")
             + ":", "", "| run | layout | rate | param_hash |", "|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r.get('label', r.get('name'))} | {r.get('layout', '1x' + str(r['ranks']))} "
                     f"| {r.get('rate', 'none')} | {r['param_hash']} |")
    return lines


def zeropp_section(rows):
    """Markdown lines: each ZeRO++ configuration (and HSDP) against flat ZeRO-3 of the same layout
    and rate: the inter-node volume cut (interface counters and model) and the step-time change,
    measured and predicted (the serialized comm difference), or nothing without such pairs."""
    good = [r for r in rows if "error" not in r]
    base = {(r["layout"], r["rate"]): r for r in good if r["config"] == "zero3"}
    pairs = [(r, base[(r["layout"], r["rate"])]) for r in good
             if r["config"] in ZEROPP and (r["layout"], r["rate"]) in base and
             r["model_inter_all_ranks"]]
    if not pairs:
        return []
    lines = ["", "## ZeRO++ against flat ZeRO-3 (same layout and rate)", "",
             "| config | layout | rate | inter MB (iface) | cut vs ZeRO-3, iface | cut, model | "
             "step ms | ZeRO-3 step ms | step change, measured | predicted (serialized comm) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r, z in pairs:
        cut_i = z["iface_inter_per_step"] / r["iface_inter_per_step"]
        cut_m = z["model_inter_all_ranks"] / r["model_inter_all_ranks"]
        d_meas = r["median_step_ms"] - z["median_step_ms"]
        d_pred = r["predicted_comm_ms"] - z["predicted_comm_ms"]
        lines.append(f"| {r['label']} | {r['layout']} | {r['rate']} | "
                     f"{fmt_b(r['iface_inter_per_step'])} | {cut_i:.2f}x | {cut_m:.2f}x | "
                     f"{r['median_step_ms']:.1f} | {z['median_step_ms']:.1f} | "
                     f"{d_meas:+.1f} ms ({d_meas / z['median_step_ms']:+.0%}) | "
                     f"{d_pred:+.1f} ms |")
    return lines


def plot(out, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scaling_report: matplotlib not installed (Debian: python3-matplotlib): "
              "plots skipped, report.md written", file=sys.stderr)
        return
    good = [r for r in rows if "error" not in r]
    def rate_key(rate):  # "1gbit" < "10gbit"; "none" first
        digits = "".join(ch for ch in rate if ch.isdigit())
        return (0, 0) if not digits else (1, int(digits) * (1000 if "gbit" in rate else 1))

    rates = sorted({r["rate"] for r in good}, key=rate_key)
    layouts = []
    for r in good:
        lay = f"{r['nodes']}x{r['ranks_per_node']}"
        if lay not in layouts:
            layouts.append(lay)
    configs = [c for c in CONFIG_LABELS if any(r["config"] == c for r in good)]

    def bars(key, ylabel, fname, title):
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), squeeze=False)
        width = 0.8 / max(1, len(configs))
        for ax, rate in zip(axes[0], rates):
            for i, c in enumerate(configs):
                xs, ys = [], []
                for j, lay in enumerate(layouts):
                    for r in good:
                        if (r["rate"] == rate and r["config"] == c and
                                f"{r['nodes']}x{r['ranks_per_node']}" == lay):
                            xs.append(j + i * width)
                            ys.append(key(r))
                ax.bar(xs, ys, width, label=CONFIG_LABELS[c])
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(layouts))])
            ax.set_xticklabels([f"{lay}\n(nodes x ranks)" for lay in layouts])
            ax.set_ylabel(ylabel)
            ax.set_title(f"{title}, links {rate}")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)

    bars(lambda r: r["median_step_ms"], "median step time (ms)", "step_time.png", "Step time")
    bars(lambda r: r["median_tokens_per_s"], "tokens/s (all ranks)", "tokens_per_s.png",
         "Throughput")

    fig, ax = plt.subplots(figsize=(8, 5))
    names = [f"{r['config']} {r['nodes']}x{r['ranks_per_node']} {r['rate']}" for r in good]
    x = range(len(good))
    w = 0.27
    ax.bar([i - w for i in x], [r["model_inter_all_ranks"] / 1e6 for r in good], w,
           label="model (algorithms' bytes)")
    ax.bar(list(x), [r["iface_inter_per_step"] / 1e6 for r in good], w,
           label="interface counters")
    ax.bar([i + w for i in x], [(r["log_inter_all_ranks"] or 0) / 1e6 for r in good], w,
           label="zs_train link counters")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("MB sent across nodes per step (all ranks)")
    ax.set_title("Inter-node bytes per step")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "inter_bytes.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 6))
    good = [r for r in good if r["measured_comm_ms"] == r["measured_comm_ms"]]  # not NaN
    if not good:
        plt.close(fig)
        return
    for c in configs:
        pts = [r for r in good if r["config"] == c]
        ax.scatter([r["measured_comm_ms"] for r in pts], [r["predicted_comm_ms"] for r in pts],
                   label=CONFIG_LABELS[c])
        ax.vlines([r["measured_comm_ms"] for r in pts], [r["predicted_comm_hidden_ms"] for r in pts],
                  [r["predicted_comm_ms"] for r in pts], lw=0.8)
        for r in pts:
            ax.annotate(f"{r['nodes']}x{r['ranks_per_node']} {r['rate']}",
                        (r["measured_comm_ms"], r["predicted_comm_ms"]), fontsize=6)
    hi = max([1.0] + [max(r["measured_comm_ms"], r["predicted_comm_ms"]) for r in good]) * 1.1
    ax.plot([0, hi], [0, hi], "k-", lw=0.8, label="predicted = measured")
    ax.plot([0, hi], [0, 1.25 * hi], "k:", lw=0.6, label="+-25%")
    ax.plot([0, hi], [0, 0.75 * hi], "k:", lw=0.6)
    ax.set_xlim(min(0, min(r["measured_comm_ms"] for r in good) * 1.1), hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured comm per step (ms): step - compute reference")
    ax.set_ylabel("predicted comm per step (ms): serialized (dot) down to hidden")
    ax.set_title("Communication time per step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "comm_time.png"), dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) == 2 and argv[1] == "--plan-args":
        print(plan_args(sys.stdin.read().split("\n")))
        return 0
    check = None
    if len(argv) == 4 and argv[2] == "--check-bytes":
        check = float(argv[3])
    elif len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    rows, refs = build_rows(out)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"references": refs, "rows": rows}, f, indent=1)
    write_markdown(out, rows, refs)
    plot(out, rows)
    print(f"scaling_report: {len(rows)} configuration(s): {out}/report.md")
    if check is not None:
        def counters_differ(r):  # zs_train's link counters against the model's, exactly
            return (r["log_inter_all_ranks"] != r["model_counted_inter_all_ranks"] or
                    r["log_intra_all_ranks"] != r["model_counted_intra_all_ranks"])

        bad = [r for r in rows if "error" in r or counters_differ(r) or
               (r["model_inter_all_ranks"] and not abs(r["iface_vs_model"]) <= check)]
        for r in rows:
            if "error" not in r:
                print(f"  {r['name']}: inter-node bytes per step: model {r['model_inter_all_ranks']}"
                      f", interface counters {r['iface_inter_per_step']:.0f} "
                      f"({100 * r['iface_vs_model']:+.2f}%); link counters "
                      f"{r['log_inter_all_ranks']:.0f} inter, {r['log_intra_all_ranks']:.0f} intra, "
                      f"model {r['model_counted_inter_all_ranks']}, "
                      f"{r['model_counted_intra_all_ranks']}")
        if bad:
            print(f"scaling_report: FAILED: {len(bad)} configuration(s) off by more than "
                  f"{100 * check:g}% or failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
