#!/usr/bin/env bash
# Validation grid of the link-level network model against SimGrid's flow model (docs/network-models.md): every
# registered algorithm with calibrated VGG-16 gradients (density 1%) on a star, the fat_tree_4096 preset
# (oversubscribed 16:1 at its first level) and the Piz Daint dragonfly preset, P = 16, 64, 256 and
# n = 2^20, 2^24, each point once under CM02 and once under LinkLevel (sweep.json). Then compare.py pairs
# them: OUT/comparison.csv (every phase of every point) and OUT/summary.md (median and worst difference of the
# per-iteration time per platform, whether the algorithms rank the same, the phases that differ most); exit 1
# if any count but time differs. Notebook 9 plots OUT (SPARSIM_NETWORK_MODELS_DIR=OUT).
# Usage: bash bench/network_models/run.sh [--quick] [--out DIR] [--jobs N] [--build DIR]
#   --quick: P = 16, 64 and n = 2^20 only (108 runs, about 3 minutes on 2 cores); the full grid takes hours
#   (SparCML under CM02 at P = 256, n = 2^24 alone takes minutes per iteration).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=results/network_models
jobs=$(nproc)
build=build
only=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) only=(--only ranks=16 --only ranks=64 --only workload.n=1048576) ;;
    --out) out=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: bash bench/network_models/run.sh [--quick] [--out DIR] [--jobs N] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
"$build/sparsim" sweep bench/network_models/sweep.json --out "$out" --jobs "$jobs" --resume "${only[@]}"
python3 bench/network_models/compare.py "$out/summary.csv" "$out"
