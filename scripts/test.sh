#!/usr/bin/env bash
# Sets up (packages, Release build), checks the include layers and the formatting, runs the whole test suite
# with ctest, then the reliability stages (docs/reliability.md): the sanitizer build's tests and a bounded run
# of each fuzzer.
# Usage: bash scripts/test.sh      (SPARSIM_QUICK_TESTS=1 stops after the ctest suite;
#                                   SPARSIM_FUZZ_SECONDS sets the time per fuzzer, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check_layers.sh
bash scripts/check_format.sh
build=${SPARSIM_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
if [ "${SPARSIM_QUICK_TESTS:-0}" != 1 ]; then
  bash scripts/sanitize.sh
  bash scripts/fuzz.sh "${SPARSIM_FUZZ_SECONDS:-60}"
fi
