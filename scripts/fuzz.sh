#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz/ and runs each for a
# bounded time. A crash stops the script with the reproducer under build-fuzz/artifacts/.
# Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60; SPARSIM_FUZZ_BUILD_DIR overrides the folder)
# Reproduce a finding: build-fuzz/fuzz/fuzz_config build-fuzz/artifacts/fuzz_config-crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${SPARSIM_FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DSPARSIM_BUILD_FUZZERS=ON -DSPARSIM_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_config fuzz_npy

mkdir -p "$build/artifacts"
for target in config npy; do
  # New inputs go to the first (scratch) corpus folder; the committed seeds stay untouched.
  work="$build/corpus/$target"
  mkdir -p "$work"
  seeds=(tests/fuzz/corpus/"$target")
  [ "$target" = npy ] && seeds+=(tests/data)
  log="$build/fuzz_$target.log"
  echo "fuzz: fuzz_$target for $seconds s (log $log)"
  status=0
  "$build/fuzz/fuzz_$target" "$work" "${seeds[@]}" -dict=tests/fuzz/$target.dict -max_total_time="$seconds" \
      -max_len=4096 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/fuzz_$target-" \
      >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  corpus=$(ls "$work" | wc -l)
  echo "fuzz: fuzz_$target: ${runs:-?} executions, $corpus inputs in the scratch corpus, exit status $status"
  if [ "$status" -ne 0 ]; then
    grep -E "ERROR|SUMMARY|==[0-9]+==|Test unit written" "$log" | head -20
    exit 1
  fi
done
