"""The main job's report: the sparse allreduces beside the dense ones, from one sweep folder.

Usage: python3 notebooks/compare_allreduces.py SWEEP_DIR
SWEEP_DIR is the output of `sparsim sweep configs/default/comparison.json --out SWEEP_DIR` (any sweep whose
points share P, n and k works). Prints one table and writes SWEEP_DIR/comparison.md (the same table in
Markdown), SWEEP_DIR/comparison.csv and the figure SWEEP_DIR/comparison.png (volume against the bounds,
time per iteration split into compute, selection and communication). Needs Debian's python3-matplotlib
(run it with `$(command -v -p python3)`).

Volume is in words (4 bytes) received by the busiest rank, divided by k. Every row averages the iterations
after the first; Ok-Topk's first iteration re-evaluates its thresholds (it does so every
`selection.reevaluate_every`-th iteration, 32 by default) and gets a row of its own.
"""
import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WORD_BYTES = 4
NOT_COMMUNICATION = ("compute", "staging", "selection")
LABELS = {"oktopk": "Ok-Topk", "topka": "TopkA", "gtopk": "gTopk", "sparcml_dsar_split_allgather": "SparCML DSAR",
          "sparcml_ssar_split_allgather": "SparCML SSAR", "sparcml_ssar_recursive_double": "SparCML SSAR rec. doubling",
          "dense_ring": "dense ring", "dense_rabenseifner": "Rabenseifner",
          "dense_recursive_doubling": "recursive doubling"}


def iteration_rows(folder):
    """results.csv of one point as {iteration: {phase: row}}."""
    with open(folder / "results.csv", newline="") as f:
        table = {}
        for row in csv.DictReader(f):
            table.setdefault(int(row["iteration"]), {})[row["phase"]] = row
    return table


def measure(phases_per_iteration, k):
    """Mean over the given iterations: words received by the busiest rank / k, and time per part (s)."""
    count = len(phases_per_iteration)
    totals = [phases["total"] for phases in phases_per_iteration]
    part = {name: sum(float(p[name]["sim_time_s"]) if name in p else 0.0 for p in phases_per_iteration) / count
            for name in NOT_COMMUNICATION}
    total = sum(float(t["sim_time_s"]) for t in totals) / count
    return {
        "words_per_k": sum(float(t["bytes_recv_max"]) for t in totals) / count / WORD_BYTES / k,
        "compute": part["compute"] + part["staging"],
        "selection": part["selection"],
        "communication": total - sum(part.values()),
        "total": total,
    }


def load_rows(sweep):
    rows, setting = [], None
    for folder in sorted((sweep / "points").iterdir()):
        if not (folder / "manifest.json").exists():
            continue
        config = json.loads((folder / "manifest.json").read_text())["config"]
        workload = config["workload"]
        k = int(workload["density"] * workload["n"])
        written = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
        platform = Path(written.get("topology", {}).get("file", config["topology"]["type"])).stem
        point_setting = (config["ranks"], workload["n"], k, platform,
                         config["network"]["model"], config["gradients"].get("model", config["gradients"]["source"]))
        if setting is not None and point_setting[:3] != setting[:3]:
            sys.exit(f"compare_allreduces: {folder} has (P, n, k) = {point_setting[:3]}, the others {setting[:3]}")
        setting = point_setting
        by_iteration = iteration_rows(folder)
        iterations = sorted(by_iteration)
        steady = [by_iteration[i] for i in iterations[1:]] or [by_iteration[iterations[0]]]
        name = config["algorithm"]["name"]
        label = LABELS.get(name, name)
        rows.append({"algorithm": name, "label": label, **measure(steady, k)})
        first_total = by_iteration[iterations[0]]["total"]
        if first_total.get("reevaluation") == "1" and len(iterations) > 1:
            rows.append({"algorithm": name, "label": f"{label} (re-evaluation iteration)",
                         **measure([by_iteration[iterations[0]]], k)})
    if not rows:
        sys.exit(f"compare_allreduces: no complete point (manifest.json) under {sweep}/points")
    return rows, setting


def with_speedups(rows):
    ring = next((r for r in rows if r["algorithm"] == "dense_ring"), None)
    for r in rows:
        r["speedup"] = ring["total"] / r["total"] if ring else float("nan")
    return rows


HEADER = ["algorithm", "words recv / k", "/ lower bound", "compute ms", "selection ms", "communication ms",
          "iteration ms", "speedup vs dense ring"]


def cells(r, lower):
    return [r["label"], f'{r["words_per_k"]:.2f}', f'{r["words_per_k"] / lower:.2f}', f'{r["compute"] * 1e3:.2f}',
            f'{r["selection"] * 1e3:.3f}', f'{r["communication"] * 1e3:.3f}', f'{r["total"] * 1e3:.2f}',
            f'{r["speedup"]:.2f}x']


def caption(setting):
    ranks, n, k, platform, network, gradients = setting
    return (f"P = {ranks} ranks on {platform} ({network} network model), n = {n:,}, k = {k:,}, {gradients} "
            f"gradients. Bounds in words / k: lower 2(P-1)/P = {2 * (ranks - 1) / ranks:.2f}, "
            f"Ok-Topk's 6(P-1)/P = {6 * (ranks - 1) / ranks:.2f}.")


def text_table(rows, lower):
    lines = [HEADER] + [cells(r, lower) for r in rows]
    widths = [max(len(line[c]) for line in lines) for c in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in
                               enumerate(zip(line, widths))) for line in lines)


def markdown_table(rows, lower):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells(r, lower)) + " |" for r in rows]
    return "\n".join(lines)


def figure(rows, setting, out_png):
    ranks = setting[0]
    labels = [r["label"].replace(" (re-evaluation iteration)", "\n(re-evaluation)") for r in rows]
    x = range(len(rows))
    fig, (ax_volume, ax_time) = plt.subplots(1, 2, figsize=(13, 5.5))
    ax_volume.bar(x, [r["words_per_k"] for r in rows], width=0.6, color="tab:gray")
    ax_volume.axhline(2 * (ranks - 1) / ranks, color="tab:green", linestyle="--", label="lower bound 2(P-1)/P")
    ax_volume.axhline(6 * (ranks - 1) / ranks, color="tab:red", linestyle=":", label="Ok-Topk's bound 6(P-1)/P")
    ax_volume.set_yscale("log")
    ax_volume.set_ylabel("words received by the busiest rank / k (log scale)")
    ax_volume.set_title("Volume per rank against the bounds")
    ax_volume.legend(fontsize=9)
    bottom = [0.0] * len(rows)
    for part, color in (("compute", "tab:blue"), ("selection", "tab:orange"), ("communication", "tab:purple")):
        heights = [r[part] * 1e3 for r in rows]
        ax_time.bar(x, heights, bottom=bottom, width=0.6, label=part, color=color)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax_time.set_ylabel("simulated time per iteration (ms)")
    ax_time.set_title("Time per iteration")
    ax_time.legend(fontsize=9)
    for ax in (ax_volume, ax_time):
        ax.set_xticks(list(x), labels, rotation=30, ha="right", fontsize=9)
    fig.suptitle(caption(setting), fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=150)


def main(sweep):
    rows, setting = load_rows(sweep)
    rows = with_speedups(rows)
    lower = 2 * (setting[0] - 1) / setting[0]
    print(caption(setting))
    print(text_table(rows, lower))
    (sweep / "comparison.md").write_text(caption(setting) + "\n\n" + markdown_table(rows, lower) + "\n")
    with open(sweep / "comparison.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["algorithm", "words_recv_per_k", "compute_s", "selection_s", "communication_s",
                         "iteration_s", "speedup_vs_dense_ring"])
        for r in rows:
            writer.writerow([r["label"], r["words_per_k"], r["compute"], r["selection"], r["communication"],
                             r["total"], r["speedup"]])
    figure(rows, setting, sweep / "comparison.png")
    print(f"table: {sweep / 'comparison.md'}\nfigure: {sweep / 'comparison.png'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
