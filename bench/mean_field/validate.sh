#!/usr/bin/env bash
# The mean-field residual against its oracle (docs/gradients.md, "The mean-field residual"): whole runs with the
# network (LinkLevel, a star), each config three ways: the dense residual (generation "dense", the oracle), the
# mean-field residual (generation "candidates") and no residual ("none", candidates). Per algorithm and P, pooled
# over seeds and the iterations from 8 on: the selected m/k (median, p90, max; Ok-Topk's reuse iterations, and
# Gaussiank's, whose fitted threshold sets m; an exact top-k selects k), |U|/k, the busiest
# rank's bytes received; the oracle's own spread (its seeds split in two halves) beside the model's error.
# Gaussiank without a residual is refused (no normal fit of acc): its "none" column is left empty.
#
#   bash bench/mean_field/validate.sh [BUILD_DIR] [OUT_DIR]    (defaults: build, /tmp/bench-mean-field)
#   ALGORITHMS="oktopk topka gaussiank" RANKS="8 16" SEEDS="1 2 3 4" N=65536 ITERATIONS=48 MODEL=vgg16  (defaults)
#
# About 2 minutes per (algorithm, P) at the defaults on a 2-core machine, most of it the mean-field runs.
set -euo pipefail
build="${1:-build}"
out="${2:-/tmp/bench-mean-field}"
algorithms="${ALGORITHMS:-oktopk topka gaussiank}"
ranks_list="${RANKS:-8 16}"
seeds="${SEEDS:-1 2 3 4}"
n="${N:-65536}"
iterations="${ITERATIONS:-48}"
model="${MODEL:-vgg16}"
python="$(command -v -p python3)"
mkdir -p "$out"

for algorithm in $algorithms; do
  for ranks in $ranks_list; do
    for seed in $seeds; do
      for residual in dense mean_field none; do
        name="$algorithm-P$ranks-s$seed-$residual"
        [ "$algorithm-$residual" = gaussiank-none ] && continue # refused: no normal fit of acc without a residual
        [ -f "$out/$name/results.csv" ] && continue # resumable
        generation=candidates
        [ "$residual" = dense ] && generation=dense
        cat > "$out/$name.json" <<JSON
{"name": "$name", "seed": $seed, "ranks": $ranks, "iterations": $iterations,
 "topology": {"type": "star", "nodes": $ranks, "bandwidth": "10GBps", "latency": "1us"},
 "algorithm": {"name": "$algorithm"}, "workload": {"n": $n, "density": 0.01},
 "gradients": {"source": "calibrated", "model": "$model", "generation": "$generation"},
 "selection": {"residual": "$residual", "reevaluate_every": 8},
 "network": {"model": "LinkLevel"}, "simulation": {"verify": false}}
JSON
        echo "$name" >&2
        "$build/sparsim" run "$out/$name.json" --out "$out/$name" --quiet > /dev/null
      done
    done
  done
done

"$python" - "$out" "$algorithms" "$ranks_list" "$seeds" <<'PY'
import csv, os, statistics, sys
out, algorithms, ranks_list, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()

def rows(name):
    with open(os.path.join(out, name, "results.csv")) as f:
        return [r for r in csv.DictReader(f) if r["phase"] == "total" and int(r["iteration"]) >= 8]

def figures(algorithm, ranks, seed_set, residual):
    """Pooled over seeds: per-iteration values of each figure."""
    m, m_max, union, recv = [], [], [], []
    for seed in seed_set:
        for r in rows(f"{algorithm}-P{ranks}-s{seed}-{residual}"):
            if algorithm == "oktopk" and r["reevaluation"] == "1":
                continue  # Ok-Topk: the threshold-reuse iterations only
            k = float(r["k"])
            m.append(float(r["local_selected_sum"]) / (int(ranks) * k))
            m_max.append(float(r["local_selected_max"]) / k)
            union.append(float(r["result_nnz"]) / k)
            recv.append(float(r["bytes_recv_max"]))
    q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))]
    return {"m/k median": statistics.median(m), "m/k p90": q(m, 0.9), "m/k max": max(m_max),
            "|U|/k median": statistics.median(union), "busiest recv median": statistics.median(recv)}

half = len(seeds) // 2
print("| algorithm | P | figure | dense (oracle) | oracle spread (seed halves) | mean_field | error | none | error |")
print("|---|---|---|---|---|---|---|---|---|")
for algorithm in algorithms:
    for ranks in ranks_list:
        dense = figures(algorithm, ranks, seeds, "dense")
        model = figures(algorithm, ranks, seeds, "mean_field")
        none = figures(algorithm, ranks, seeds, "none") if algorithm != "gaussiank" else None
        a = figures(algorithm, ranks, seeds[:half], "dense") if half else None
        b = figures(algorithm, ranks, seeds[half:], "dense") if half else None
        for key in dense:
            if algorithm not in ("oktopk", "gaussiank") and key.startswith("m/k"):
                continue  # an exact top-k selects k
            spread = f"{abs(a[key] / b[key] - 1):.1%}" if a else "-"
            without = f"{none[key]:.4g} | {none[key] / dense[key] - 1:+.1%}" if none else "refused | -"
            print(f"| {algorithm} | {ranks} | {key} | {dense[key]:.4g} | {spread} | {model[key]:.4g} | "
                  f"{model[key] / dense[key] - 1:+.1%} | {without} |")
PY
