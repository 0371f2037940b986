#!/usr/bin/env bash
# Runs tests/recorder/test_recorder.py MODE with Debian's python3 (the one python3-torch installs into), on a
# fresh scratch folder. Exit 77 (ctest: skipped) when that python cannot import torch and numpy.
# Usage: run_recorder_test.sh MODE SPARSIM_BINARY SOURCE_DIR SCRATCH_FOLDER   (SPARSIM_PYTHON overrides the python)
set -euo pipefail
mode=$1 sparsim=$2 source_dir=$3 scratch=$4
python=${SPARSIM_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch, numpy" 2>/dev/null; then
  echo "SKIPPED: $python cannot import torch and numpy (apt-get install python3-torch); the recorder is not tested"
  exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch"
PYTHONPATH="$source_dir/python${PYTHONPATH:+:$PYTHONPATH}" exec "$python" "$source_dir/tests/recorder/test_recorder.py" \
  "$mode" "$sparsim" "$scratch"
