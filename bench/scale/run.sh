#!/usr/bin/env bash
# Scale benchmark (docs/benchmarks.md, "At scale"): each algorithm on the Piz Daint preset, n = 2^24, density
# 1%, uniform gradients; sparse algorithms keep no residual (selection.residual "none", exact for the first
# sparse iteration) and run 2 iterations (the first re-evaluates thresholds, the second reuses them); dense
# algorithms move phantom data for 1 iteration. Each run under every network model of MODELS (SimGrid's flows
# "CM02", the link-level model "LinkLevel"). Prints a markdown table: wall time of the measured iteration split
# into the selection stage (preparing every rank's gradient and local top-k) and the rest (the network model
# and the algorithm's own work), peak RSS, simulated messages of that iteration and messages per wall second
# of the rest.
# Usage: bash bench/scale/run.sh [BUILD_DIR]
#   env: RANKS="256 1024", ALGORITHMS="...", MODELS="CM02 LinkLevel", OUT=DIR, THREADS=N
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
ranks=${RANKS:-"256 1024"}
algorithms=${ALGORITHMS:-"dense_ring topka gtopk sparcml_dsar_split_allgather oktopk"}
out=${OUT:-results/bench-scale}
models=${MODELS:-"CM02 LinkLevel"}
threads=${THREADS:-$(nproc)}
platform=$(pwd)/configs/platforms/piz_daint.json
mkdir -p "$out"
python=$(command -v -p python3)

echo "| algorithm | P | network model | measured iteration | wall (s) | selection stage (s) | rest (s) | peak RSS (GiB) | messages | messages / wall s of the rest | simulated time (s) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for P in $ranks; do
  for algorithm in $algorithms; do
  for model in $models; do
    name="${algorithm}_P${P}_${model}"
    config="$out/$name.json"
    case $algorithm in
      dense_*) workload='{"n": 16777216, "data": "phantom"}'; iterations=1; extra='' ;;
      *) workload='{"n": 16777216, "density": 0.01}'; iterations=2; extra=', "selection": {"residual": "none"}' ;;
    esac
    cat > "$config" <<JSON
{"name": "$name", "seed": 1, "ranks": $P, "iterations": $iterations,
 "topology": {"file": "$platform"}, "algorithm": {"name": "$algorithm"},
 "workload": $workload, "gradients": {"source": "uniform"}, "network": {"model": "$model"}$extra}
JSON
    "$build/sparsim" run "$config" --out "$out/$name" --quiet --threads "$threads" > "$out/$name.log" 2>&1 ||
      { echo "| $algorithm | $P | $model | failed: see $out/$name.log | | | | | | | |"; continue; }
    "$python" - "$out/$name" <<'PY'
import csv, json, sys
run = sys.argv[1]
manifest = json.load(open(f"{run}/manifest.json"))
walls = manifest["iteration_wall_s"]
last = len(walls) - 1
wall = walls[last] - (walls[last - 1] if last > 0 else 0.0)
selection = manifest["iteration_selection_wall_s"][last]
rest = wall - selection
messages = sum(int(r["msgs_sent"]) for r in csv.DictReader(open(f"{run}/ranks.csv")) if int(r["iteration"]) == last)
sim = [float(r["sim_time_s"]) for r in csv.DictReader(open(f"{run}/results.csv"))
       if r["phase"] == "total" and int(r["iteration"]) == last][0]
cfg = manifest["config"]
print(f"| {cfg['algorithm']['name']} | {cfg['ranks']} | {cfg['network']['model']} | {last} | {wall:.1f} | {selection:.1f} "
      f"| {rest:.1f} | {manifest['peak_rss_bytes'] / 2**30:.2f} | {messages} | {messages / max(rest, 1e-9):,.0f} | {sim:.4g} |")
PY
  done
  done
done
