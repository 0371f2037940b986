#!/usr/bin/env bash
# Sets up (the sparsim binary only), then runs the default experiment: Ok-Topk, TopkA, gTopk and SparCML
# beside the dense ring and Rabenseifner allreduces on the Piz Daint-like dragonfly with calibrated VGG-16
# gradients (configs/default/comparison.json), prints one table (volume per rank against the bounds, time per
# iteration split into compute, selection and communication, speedup over the dense ring) and draws it.
# Usage: bash scripts/main.sh [OUT_DIR]      (default results/default)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh main
build=${SPARSIM_BUILD_DIR:-build}
out=${1:-results/default}
"$build/sparsim" sweep configs/default/comparison.json --out "$out"
"$(command -v -p python3)" notebooks/compare_allreduces.py "$out"
