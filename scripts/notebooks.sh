#!/usr/bin/env bash
# Runs the small CI sweeps and executes every notebook in notebooks/ headless on them with Debian's
# `jupyter nbconvert --execute`; the executed notebooks go to OUT_DIR/notebooks and their figures (PNG and
# PDF) to OUT_DIR/figures. The repository's notebooks stay without outputs. Sweeps, all in
# configs/studies/ci_small/: sweep.json into OUT_DIR (notebooks 1-4), time_to_accuracy.json into
# OUT_DIR/time_to_accuracy (notebook 5, SPARSIM_TTA_DIR), oktopk_study.json into OUT_DIR/oktopk_study
# (notebook 6, SPARSIM_OKTOPK_DIR), crossover.json into OUT_DIR/crossover and crossover_large.json into
# OUT_DIR/crossover_large (notebook 7, SPARSIM_CROSSOVER_DIR and SPARSIM_CROSSOVER_LARGE_DIR),
# reduction.json into OUT_DIR/reduction (notebook 8, SPARSIM_REDUCTION_DIR), network_models.json into
# OUT_DIR/network_models (notebook 9, SPARSIM_NETWORK_MODELS_DIR), gpu_clusters.json into OUT_DIR/gpu_clusters
# (notebook 10, SPARSIM_GPU_CLUSTERS_DIR).
# A notebook that fails makes this script fail (ctest runs it).
# Usage: bash scripts/notebooks.sh [OUT_DIR]     (default results/ci_small; SPARSIM overrides the binary,
#        default ${SPARSIM_BUILD_DIR:-build}/sparsim; the sweep runs on all cores unless SPARSIM_JOBS is set)
set -euo pipefail
cd "$(dirname "$0")/.."
sparsim=${SPARSIM:-${SPARSIM_BUILD_DIR:-build}/sparsim}
out=$(realpath -m "${1:-results/ci_small}")
command -v jupyter >/dev/null || { echo "notebooks: jupyter is missing (bash scripts/setup.sh installs it)"; exit 1; }

"$sparsim" sweep configs/studies/ci_small/sweep.json --out "$out" ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}

# The time-to-accuracy training run in small (notebooks/5_time_to_accuracy.ipynb).
"$sparsim" sweep configs/studies/ci_small/time_to_accuracy.json --out "$out/time_to_accuracy" \
  ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}

# The Ok-Topk study in small (notebooks/6_oktopk_study.ipynb).
"$sparsim" sweep configs/studies/ci_small/oktopk_study.json --out "$out/oktopk_study" \
  ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
export SPARSIM_OKTOPK_DIR="$out/oktopk_study"

# The crossover notebook (7_crossover) reads its own sweep: P = 4, 8, 16 on both platforms, communication only.
"$sparsim" sweep configs/studies/ci_small/crossover.json --out "$out/crossover" ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
# Its large grid in small: P = 16, 32 under the link-level model (P = 16 is the bridge to the grid above).
"$sparsim" sweep configs/studies/ci_small/crossover_large.json --out "$out/crossover_large" \
  ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
export SPARSIM_CROSSOVER_DIR="$out/crossover" SPARSIM_CROSSOVER_LARGE_DIR="$out/crossover_large"

# What merges cost (8_reduction_cost): the Ok-Topk study's VGG-16 point at P = 8 with reductions charged at four rates.
"$sparsim" sweep configs/studies/ci_small/reduction.json --out "$out/reduction" ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
export SPARSIM_REDUCTION_DIR="$out/reduction"

# Both network models on the same points (9_network_models): P = 8, 16 on the star, fat tree and dragonfly.
"$sparsim" sweep configs/studies/ci_small/network_models.json --out "$out/network_models" \
  ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
export SPARSIM_NETWORK_MODELS_DIR="$out/network_models"

# Sparse allreduces on today's GPU clusters (10_gpu_clusters): P = 8, 16 on Piz Daint and the two GPU presets.
"$sparsim" sweep configs/studies/ci_small/gpu_clusters.json --out "$out/gpu_clusters" \
  ${SPARSIM_JOBS:+--jobs "$SPARSIM_JOBS"}
export SPARSIM_GPU_CLUSTERS_DIR="$out/gpu_clusters"

mkdir -p "$out/notebooks"
# The CI training run is short (40 iterations at P = 4): its time-to-accuracy tables target 60% and 50%.
export SPARSIM_SWEEP_DIR="$out" SPARSIM_TTA_DIR="$out/time_to_accuracy" SPARSIM_TTA_TARGETS=0.6,0.5 \
  SPARSIM_FIGURES_DIR="$out/figures" PYDEVD_DISABLE_FILE_VALIDATION=1
for notebook in notebooks/*.ipynb; do
  echo "notebooks: executing $notebook"
  jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 \
    --output-dir "$out/notebooks" "$notebook"
done
echo "notebooks: executed notebooks in $out/notebooks, figures in $out/figures"
