"""Plot a set of sparsim runs side by side: simulated time per iteration split into phases, and bytes sent
by the busiest rank, each beside the algorithm's closed form.

Usage: python3 notebooks/plot_runs.py RESULTS_DIR OUT.png
RESULTS_DIR holds one folder per run (each with results.csv and manifest.json). Needs Debian's
python3-matplotlib (run it with `$(command -v -p python3)`).
"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load_run(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    with open(folder / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    phase_time = defaultdict(list)
    totals = []
    for row in rows:
        if row["phase"] == "total":
            totals.append(row)
        else:
            phase_time[row["phase"]].append(float(row["sim_time_s"]))
    iterations = len(totals)
    return {
        "label": f'{manifest["config"]["algorithm"]["name"].replace("dense_", "").replace("_", " ")}'
        f'\nP={manifest["config"]["ranks"]}',
        "phases": {p: sum(t) / iterations for p, t in phase_time.items()},
        "time": sum(float(r["sim_time_s"]) for r in totals) / iterations,
        "model_time": manifest["closed_form"]["time_s"],
        "bytes": max(float(r["bytes_sent_max"]) for r in totals),
        "model_bytes": manifest["closed_form"]["bytes_sent_per_rank"],
        "title": f'{manifest["config"]["topology"].get("type", "")}, n = {manifest["config"]["workload"]["n"]}',
    }


def main(results_dir, out_png):
    runs = [load_run(d) for d in sorted(Path(results_dir).iterdir()) if (d / "manifest.json").exists()]
    if not runs:
        sys.exit(f"plot_runs: no completed runs (manifest.json) under {results_dir}")
    fig, (ax_time, ax_bytes) = plt.subplots(1, 2, figsize=(10, 5))
    x = range(len(runs))
    phases = sorted({p for r in runs for p in r["phases"]})
    bottom = [0.0] * len(runs)
    for phase in phases:
        heights = [r["phases"].get(phase, 0.0) * 1e3 for r in runs]
        ax_time.bar(x, heights, bottom=bottom, label=phase, width=0.6)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax_time.scatter(x, [r["model_time"] * 1e3 for r in runs], color="black", marker="_", s=900, zorder=3,
                    label="closed form (contention-free)")
    ax_time.set_ylabel("simulated time per iteration (ms)")
    ax_time.set_xticks(list(x), [r["label"] for r in runs])
    ax_time.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    ax_bytes.bar(x, [r["bytes"] / 2**20 for r in runs], width=0.6, color="tab:gray", label="measured")
    ax_bytes.scatter(x, [r["model_bytes"] / 2**20 for r in runs], color="black", marker="_", s=900, zorder=3,
                     label="closed form")
    ax_bytes.set_ylabel("bytes sent by the busiest rank (MiB)")
    ax_bytes.set_xticks(list(x), [r["label"] for r in runs])
    ax_bytes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    fig.suptitle(f"Dense allreduces on {runs[0]['title']}")
    fig.tight_layout()
    fig.savefig(out_png, dpi=150)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
