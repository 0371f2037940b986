#!/usr/bin/env python3
"""Pairs every point of the network-model sweep run under SimGrid's flows (CM02) with the same point under the
link-level model (LinkLevel) and writes, per point, iteration and phase, both simulated times and their
relative difference (link-level / flows - 1), after checking that everything but time is identical.

Usage: compare.py SUMMARY.csv OUT_DIR
Writes OUT_DIR/comparison.csv (every phase of every point) and OUT_DIR/summary.md (per platform: median and
worst difference of the per-iteration time, ranking agreement, the phases that differ most). Exit 1 if a byte
or message count differs between the models.
"""
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REFERENCE, FAST = "CM02", "LinkLevel"
# Columns that must be equal under both models (everything but time).
SAME = ["msgs_sent_max", "bytes_sent_max", "bytes_sent_mean", "bytes_recv_max", "bytes_recv_mean", "k",
        "local_selected_max", "local_selected_sum", "global_selected", "result_nnz", "reevaluation"]


def platform_name(row):
    return row["topology"] + ("" if row["topology"] != "dragonfly" else " (piz_daint)")


def main():
    summary, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    rows = defaultdict(dict)  # (point key, iteration, phase) -> model -> row
    for row in csv.DictReader(summary.open()):
        key = (row["axis:@algorithm"], row["axis:@platform"], row["axis:ranks"], row["axis:workload.n"])
        rows[(key, row["iteration"], row["phase"])][row["axis:network.model"]] = row

    mismatches = []
    table = []
    for (key, iteration, phase), by_model in sorted(rows.items()):
        if REFERENCE not in by_model or FAST not in by_model:
            continue
        ref, fast = by_model[REFERENCE], by_model[FAST]
        for column in SAME:
            if ref[column] != fast[column]:
                mismatches.append(f"{key} it {iteration} {phase}: {column} {ref[column]} vs {fast[column]}")
        t_ref, t_fast = float(ref["sim_time_s"]), float(fast["sim_time_s"])
        table.append({"algorithm": ref["algorithm"], "platform": platform_name(ref), "ranks": int(ref["ranks"]),
                      "n": int(ref["n"]), "iteration": int(iteration), "phase": phase, "flows_s": t_ref,
                      "link_level_s": t_fast, "difference": (t_fast / t_ref - 1) if t_ref > 0 else 0.0})

    with (out / "comparison.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0].keys()))
        writer.writeheader()
        writer.writerows(table)

    lines = [f"# {FAST} against {REFERENCE}: per-iteration simulated time", "",
             "| platform | points | median | worst | worst point | rankings equal |", "|---|---|---|---|---|---|"]
    totals = [r for r in table if r["phase"] == "total"]
    for platform in sorted({r["platform"] for r in totals}):
        mine = [r for r in totals if r["platform"] == platform]
        diffs = [abs(r["difference"]) for r in mine]
        worst = max(mine, key=lambda r: abs(r["difference"]))
        # Ranking of the algorithms at each (ranks, n, iteration) under both models.
        groups = defaultdict(list)
        for r in mine:
            groups[(r["ranks"], r["n"], r["iteration"])].append(r)
        equal = sum(1 for g in groups.values()
                    if [r["algorithm"] for r in sorted(g, key=lambda r: r["flows_s"])]
                    == [r["algorithm"] for r in sorted(g, key=lambda r: r["link_level_s"])])
        lines.append(f"| {platform} | {len(mine)} | {100 * statistics.median(diffs):.2f}% | "
                     f"{100 * abs(worst['difference']):.2f}% | {worst['algorithm']} P={worst['ranks']} "
                     f"n={worst['n']} it {worst['iteration']} ({100 * worst['difference']:+.2f}%) | "
                     f"{equal}/{len(groups)} |")
    lines += ["", "Phases that differ most (link-level / flows - 1; phases over 1% of their iteration):", "",
              "| algorithm | platform | P | n | it | phase | flows | link-level | difference |", "|---|---|---|---|---|---|---|---|---|"]
    total_of = {(r["algorithm"], r["platform"], r["ranks"], r["n"], r["iteration"]): r["flows_s"] for r in totals}
    phases = [r for r in table if r["phase"] != "total"
              and r["flows_s"] > 0.01 * total_of[(r["algorithm"], r["platform"], r["ranks"], r["n"], r["iteration"])]]
    for r in sorted(phases, key=lambda r: -abs(r["difference"]))[:15]:
        lines.append(f"| {r['algorithm']} | {r['platform']} | {r['ranks']} | {r['n']} | {r['iteration']} | "
                     f"{r['phase']} | {r['flows_s'] * 1e3:.4g} ms | {r['link_level_s'] * 1e3:.4g} ms | "
                     f"{100 * r['difference']:+.2f}% |")
    if mismatches:
        lines += ["", f"{len(mismatches)} counts differ between the models:"] + [f"- {m}" for m in mismatches[:20]]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
