#!/usr/bin/env bash
# How deep the ranks' fiber stacks reach (network.runtime "fibers"), to choose network.fiber_stack's default:
# every registered algorithm with its default selection, on every gradient path that runs a different depth of
# code on a rank's stack (uniform and calibrated dense gradients with the dense residual, the calibrated
# candidates generation with the mean-field residual, the closed-loop Fashion-MNIST MLP), with --threads 1 so
# that rank 0's fiber also runs the whole selection stage (it is one of the stage's threads). Each run reports
# the deepest reach in its manifest (network.fiber_stack.deepest_reach_bytes: from a stack's top to the lowest
# page of it that is present, at most a page more than the deepest frame). The runs show their progress and
# record a trace, which run on the ranks' stacks too.
#
# Usage: bench/fiber_stack/run.sh [BUILD_DIR]   (default build; a sanitizer build, e.g. build-asan, measures
#                                                 AddressSanitizer's deeper frames)
# Environment: STACK (network.fiber_stack of the runs, default "256KiB"), OUT (default BUILD_DIR/fiber_stack).
# Prints a markdown table, deepest first.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${1:-$root/build}")
stack=${STACK:-256KiB}
out=$(realpath -m "${OUT:-$build/fiber_stack}")
sparsim=$build/sparsim
[ -x "$sparsim" ] || { echo "no sparsim in $build: build it first" >&2; exit 2; }
mkdir -p "$out"

sparse="topka gtopk oktopk gaussiank sparcml_ssar_recursive_double sparcml_ssar_split_allgather
        sparcml_dsar_split_allgather spardl"
dense="dense_ring dense_rabenseifner dense_recursive_doubling dense_hierarchical"

run() { # LABEL RANKS ALGORITHM GRADIENTS_JSON [SELECTION_JSON [N]]
  local label=$1 ranks=$2 algorithm=$3 gradients=$4 selection=${5:-"{}"} n=${6:-262144} spec
  spec="{\"name\": \"$algorithm\"}"
  [ "$algorithm" = dense_hierarchical ] && spec="{\"name\": \"dense_hierarchical\", \"ranks_per_node\": 1}"
  mkdir -p "$out/$label"
  cat >"$out/$label/config.json" <<JSON
{"name": "$label", "seed": 5, "ranks": $ranks, "iterations": 4,
 "topology": {"type": "star", "nodes": $ranks, "bandwidth": "10GBps", "latency": "1us"},
 "network": {"model": "LinkLevel", "runtime": "fibers", "fiber_stack": "$stack"},
 "algorithm": $spec,
 "workload": {"n": $n, "density": 0.01},
 "selection": $selection,
 "gradients": $gradients}
JSON
  # Not --quiet: rank 0's fiber also draws the progress display; the trace is recorded on the ranks' stacks too.
  "$sparsim" run "$out/$label/config.json" --out "$out/$label/out" --threads 1 --trace "$out/$label/trace.json" \
    >"$out/$label/run.log" 2>&1 ||
    { echo "$label failed: $out/$label/run.log" >&2; tail -3 "$out/$label/run.log" >&2; exit 1; }
  local reach
  reach=$(sed -n 's/.*"deepest_reach_bytes": \([0-9]*\).*/\1/p' "$out/$label/out/manifest.json")
  echo "$reach|$label"
}

{
  for algorithm in $dense $sparse; do
    run "$algorithm-uniform" 16 "$algorithm" '{"source": "uniform"}'
  done
  for algorithm in $sparse; do
    run "$algorithm-calibrated" 16 "$algorithm" '{"source": "calibrated", "model": "vgg16"}'
  done
  for algorithm in $sparse; do
    [ "$algorithm" = spardl ] && continue # selects within the collective: no candidates generation
    run "$algorithm-candidates" 64 "$algorithm" \
      '{"source": "calibrated", "model": "vgg16", "generation": "candidates"}' '{"residual": "mean_field"}'
  done
  for algorithm in topka oktopk; do
    run "$algorithm-fashion_mnist" 16 "$algorithm" \
      '{"source": "fashion_mnist_mlp", "hidden": [32], "batch": 32, "learning_rate": 0.1}' '{}' 25450
  done
} >"$out/reach.txt"

echo "| deepest reach (KiB) | run (network.fiber_stack $stack, --threads 1) |"
echo "|---|---|"
sort -t'|' -k1,1nr "$out/reach.txt" | awk -F'|' '{ printf "| %.1f | %s |\n", $1 / 1024, $2 }'
