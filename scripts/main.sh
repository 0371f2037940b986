#!/usr/bin/env bash
# Sets up, then runs the default experiment: the dense allreduces on the Piz Daint-like dragonfly
# (configs/default/*.json), and plots simulated time and volume against the closed forms.
# Usage: bash scripts/main.sh [OUT_DIR]      (default results/default)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${SPARSIM_BUILD_DIR:-build}
out=${1:-results/default}
mkdir -p "$out"
for config in configs/default/*.json; do
  "$build/sparsim" run "$config" --out "$out/$(basename "$config" .json)"
done
"$(command -v -p python3)" notebooks/plot_runs.py "$out" "$out/default.png"
echo "plot: $out/default.png"
