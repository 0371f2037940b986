#!/usr/bin/env bash
# Builds sparsim and its tests with AddressSanitizer and UndefinedBehaviorSanitizer (SPARSIM_SANITIZE) into
# build-asan/ and runs the test suite under them; the sparsim binary the CLI tests drive is instrumented too.
# Any sanitizer report aborts the process it happens in, which fails that test.
# Usage: bash scripts/sanitize.sh [CTEST_REGEX]   (default: every test; SPARSIM_ASAN_BUILD_DIR overrides
#                                                   the folder)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SPARSIM_ASAN_BUILD_DIR:-build-asan}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARSIM_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"

# SimGrid (not instrumented) switches between actor stacks; ASan warns once per process that it cannot follow
# ("ASan is ignoring requested __asan_handle_no_return", docs/reliability.md). No false report has followed.
# sparsim-mpi's tests run without the leak check in their MPI processes (tests/mpi/run_mpi_test.sh, docs/mpi.md).
export UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" ${1:+-R "$1"}
