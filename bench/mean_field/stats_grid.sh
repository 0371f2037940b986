#!/usr/bin/env bash
# The statistics grid of the mean-field residual (issue 37, item 4; docs/gradients.md, "The mean-field residual"):
# network-free, `sparsim stats` on the calibrated source, each config two ways: the oracle (generation "dense",
# residual "dense") and the model (generation "candidates", residual "mean_field"). One run per (model, n,
# density, P, seed, residual): warm-up 0 and 128 iterations with --per-iteration, so that one run gives both
# phases: start-up = iterations 0-31, steady state = iterations 96-127. The threshold-reuse loop uses the model's
# own rules (vgg, lstm, bert) and re-evaluates every REEVALUATE_EVERY iterations (default 32: iterations 0 and 96
# are exact top-k's and left out of the m/k figures).
#
# Per (model, n, density, P, phase), pooled over seeds: the reuse iterations' m_r/k (median, p90 = the value at
# position floor(0.9 N) of the N sorted, maximum), and the medians over iterations of the exact top-k loop's
# cross-rank Jaccard, union / (P k), busiest region / mean and threshold drift (the exact k-th largest |acc|'s
# relative change per iteration, mean over ranks). Beside each: the oracle's spread (its seeds split in two
# halves, e.g. 1-2 against 3-4: |first / second - 1|), the model's error against the oracle pooled over all seeds,
# the issue's tolerance and whether it is met: "yes", "within spread" (beyond a tolerance tighter than the
# oracle's own spread, but within that spread) or "no". The maximum's tolerance is the spread itself.
#
#   bash bench/mean_field/stats_grid.sh [SPARSIM] [OUT_DIR]   (defaults: build/sparsim, /tmp/stats-grid)
#   MODELS="vgg16 lstm_an4 bert_base" NS="262144 1048576" DENSITIES="0.01 0.02" RANKS="8 64 256 1024 4096"
#   SEEDS="1 2 3 4" SEEDS_ABOVE="1" (the seeds for P > SEEDS_UP_TO=256) REEVALUATE_EVERY=32   (defaults)
#   TABLE_ONLY=1: print the table of the finished runs without running anything.
#
# P = 4096 runs at n = 2^18 only (the issue's grid). Resumable: a run whose OUT_DIR/runs/NAME.stats.json exists
# is skipped. Each run is timed (/usr/bin/time -v); OUT_DIR/runs.log gets one line per run: name, wall seconds,
# peak memory (KiB), exit status. A failed run is logged and the grid goes on; its cells are reported missing.
#
# Cost per run (measured on a shared 2-core machine, one thread, before `sparsim stats --threads` existed; the runs
# now use every core; n = 2^18): the oracle 6-7 s at P = 8 and 56 s at P = 64 (peak 60 and 190 MB); the mean-field
# model 4.2-5.9 min at P = 8 (1% and 2%) and 9.0 min at P = 64 (1%; peak 60-110 MB), about 3.6 min a run plus 5 s
# per rank at 1%. Extrapolated linearly in P and n, the whole grid takes about 8 days of one core, most of it
# P >= 256 and n = 2^20.
set -euo pipefail
sparsim="${1:-build/sparsim}"
out="${2:-/tmp/stats-grid}"
models="${MODELS:-vgg16 lstm_an4 bert_base}"
ns="${NS:-262144 1048576}"
densities="${DENSITIES:-0.01 0.02}"
ranks_list="${RANKS:-8 64 256 1024 4096}"
seeds="${SEEDS:-1 2 3 4}"
seeds_above="${SEEDS_ABOVE:-1}"
seeds_up_to="${SEEDS_UP_TO:-256}"
reevaluate_every="${REEVALUATE_EVERY:-32}"
iterations=128
python="$(command -v -p python3)"
runs="$out/runs"
mkdir -p "$runs"

rules_of() {
  case "$1" in
    lstm_an4) echo lstm ;;
    bert_base) echo bert ;;
    *) echo vgg ;;
  esac
}

seeds_for() { if [ "$1" -le "$seeds_up_to" ]; then echo "$seeds"; else echo "$seeds_above"; fi; }

if [ -z "${TABLE_ONLY:-}" ]; then
  for n in $ns; do
    for ranks in $ranks_list; do
      [ "$ranks" -gt 1024 ] && [ "$n" != 262144 ] && continue # P = 4096 at n = 2^18 only
      for model in $models; do
        for density in $densities; do
          for seed in $(seeds_for "$ranks"); do
            for residual in dense mean_field; do
              name="$model-n$n-d$density-P$ranks-s$seed-$residual"
              [ -f "$runs/$name.stats.json" ] && continue # resumable
              generation=candidates
              [ "$residual" = dense ] && generation=dense
              cat > "$runs/$name.json" <<JSON
{"name": "$name", "seed": $seed, "ranks": $ranks, "iterations": $iterations,
 "topology": {"type": "star", "nodes": $ranks, "bandwidth": "10GBps", "latency": "1us"},
 "algorithm": {"name": "oktopk"}, "workload": {"n": $n, "density": $density},
 "gradients": {"source": "calibrated", "model": "$model", "generation": "$generation"},
 "selection": {"residual": "$residual", "rules": "$(rules_of "$model")", "reevaluate_every": $reevaluate_every},
 "network": {"model": "LinkLevel"}, "simulation": {"verify": false}}
JSON
              echo "$name" >&2
              status=0
              /usr/bin/time -v "$sparsim" stats "$runs/$name.json" --warmup 0 --iterations "$iterations" \
                --json "$runs/$name.part.json" --per-iteration > "$runs/$name.txt" 2> "$runs/$name.time" ||
                status=$?
              wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
                                 for (i = 1; i <= n; ++i) s = s * 60 + t[i]; print s}' "$runs/$name.time")
              peak=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$runs/$name.time")
              echo "$name wall_s=${wall:-?} peak_kib=${peak:-?} status=$status" >> "$out/runs.log"
              if [ "$status" = 0 ]; then
                mv "$runs/$name.part.json" "$runs/$name.stats.json"
              else
                echo "FAILED ($status): $sparsim stats $runs/$name.json --warmup 0 --iterations $iterations" \
                  "--json $runs/$name.part.json --per-iteration (stderr in $runs/$name.time)" >&2
              fi
            done
          done
        done
      done
    done
  done
fi

"$python" - "$runs" "$models" "$ns" "$densities" "$ranks_list" "$seeds" "$seeds_above" "$seeds_up_to" <<'PY'
import json, math, os, statistics, sys

runs, models, ns, densities, ranks_list = sys.argv[1], *(a.split() for a in sys.argv[2:6])
seeds, seeds_above, seeds_up_to = sys.argv[6].split(), sys.argv[7].split(), int(sys.argv[8])
PHASES = {"start-up": (0, 31), "steady": (96, 127)}
# figure: (tolerance, kind); kind "rel": |error| <= tolerance; "jaccard": or the absolute difference <= 0.005;
# "spread": the tolerance is the oracle's own spread.
FIGURES = {"m/k median": (0.10, "rel"), "m/k p90": (0.15, "rel"), "m/k max": (None, "spread"),
           "Jaccard": (0.15, "jaccard"), "union/(P k)": (0.07, "rel"), "busiest region": (0.05, "rel"),
           "threshold drift": (0.20, "rel")}
cache = {}

def load(name):
    if name not in cache:
        path = os.path.join(runs, name + ".stats.json")
        cache[name] = json.load(open(path)) if os.path.exists(path) else None
    return cache[name]

def figures(prefix, seed_set, residual, phase):
    """Pooled over seed_set: the figures of the phase's iterations; None when a run is missing."""
    first, last = PHASES[phase]
    ratios, series = [], {"Jaccard": [], "union/(P k)": [], "busiest region": [], "threshold drift": []}
    keys = {"Jaccard": "jaccard", "union/(P k)": "union_ratio", "busiest region": "region_imbalance",
            "threshold drift": "threshold_drift"}
    for seed in seed_set:
        stats = load(f"{prefix}-s{seed}-{residual}")
        if stats is None:
            return None
        k = stats["k"]
        for it in stats["per_iteration"]:
            if not first <= it["iteration"] <= last:
                continue
            if not it["reevaluation"]:
                ratios.extend(m / k for m in it["reuse_selected"])
            for figure, key in keys.items():
                if it[key] is not None:
                    series[figure].append(it[key])
    ratios.sort()
    result = {"m/k median": statistics.median(ratios), "m/k p90": ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))],
              "m/k max": ratios[-1]}
    result.update({figure: statistics.median(values) for figure, values in series.items()})
    return result

def verdict(kind, tolerance, error, absolute, spread):
    if kind == "spread":
        if spread is None:
            return "- (one seed)"
        return "yes" if abs(error) <= spread else "no"
    if abs(error) <= tolerance or (kind == "jaccard" and abs(absolute) <= 0.005):
        return "yes"
    if spread is not None and spread > tolerance and abs(error) <= spread:
        return "within spread"
    return "no"

print("| model | n | density | P | seeds | phase | figure | oracle | oracle spread | mean_field | error | tolerance | met |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
counts, missing = {}, []
for n in ns:
    for ranks in ranks_list:
        if int(ranks) > 1024 and n != "262144":
            continue
        for model in models:
            for density in densities:
                seed_set = seeds if int(ranks) <= seeds_up_to else seeds_above
                prefix = f"{model}-n{n}-d{density}-P{ranks}"
                for phase in PHASES:
                    oracle = figures(prefix, seed_set, "dense", phase)
                    model_figures = figures(prefix, seed_set, "mean_field", phase)
                    if oracle is None or model_figures is None:
                        missing.append(f"{prefix} {phase}")
                        continue
                    half = len(seed_set) // 2
                    a = figures(prefix, seed_set[:half], "dense", phase) if half else None
                    b = figures(prefix, seed_set[half:], "dense", phase) if half else None
                    for figure, (tolerance, kind) in FIGURES.items():
                        o, m = oracle[figure], model_figures[figure]
                        spread = abs(a[figure] / b[figure] - 1) if a else None
                        error = m / o - 1
                        met = verdict(kind, tolerance, error, m - o, spread)
                        counts[met] = counts.get(met, 0) + 1
                        tol = "spread" if kind == "spread" else f"{tolerance:.0%}"
                        tol += " or 0.005" if kind == "jaccard" else ""
                        spread_text = f"{spread:.1%}" if spread is not None else "-"
                        print(f"| {model} | 2^{int(math.log2(int(n)))} | {float(density):.0%} | {ranks} | "
                              f"{','.join(seed_set)} | {phase} | {figure} | {o:.4g} | {spread_text} | {m:.4g} | "
                              f"{error:+.1%} | {tol} | {met} |")
print()
print("cells: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
if missing:
    print(f"not run (or a run missing): {len(missing)} (model, n, density, P, phase): " + "; ".join(missing))
PY
