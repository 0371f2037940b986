#!/usr/bin/env bash
# The candidates generation's benchmark (docs/benchmarks.md, "The candidates generation"): Ok-Topk at P = 64 with
# dense and candidates gradients side by side (same model, 4 iterations: 2 re-evaluations, 2 reuses), then the
# selection stage of gTopk (an exact top-k every iteration) at P = 4096, n = 2^24, 1%. Prints, per run, the wall
# time, the selection stage per iteration and the part of it the ranks share (floor and plan), and the peak RSS.
#
#   bash bench/candidates/run.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, /tmp/bench-candidates)
#   P4096=0 bash bench/candidates/run.sh                   skips the P = 4096 run (about 3 minutes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
out="${2:-/tmp/bench-candidates}"
sparsim="$build/sparsim"
python="$(command -v -p python3)"
mkdir -p "$out"

run() { # NAME CONFIG [JQ-LIKE GENERATION OVERRIDE]
  local name="$1" config="$2" generation="${3:-}"
  local file="$config"
  if [ -n "$generation" ]; then
    file="$out/$name.json"
    "$python" - "$config" "$generation" "$file" "$here" <<'PY'
import json, os, sys
config = json.load(open(sys.argv[1]))
config["gradients"]["generation"] = sys.argv[2]
config["name"] += "_" + sys.argv[2]
config["topology"]["file"] = os.path.normpath(os.path.join(sys.argv[4], config["topology"]["file"]))
json.dump(config, open(sys.argv[3], "w"), indent=1)
PY
  fi
  rm -rf "$out/$name"
  "$sparsim" run "$file" --out "$out/$name" --quiet
  "$python" - "$out/$name/manifest.json" "$name" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
stage = ", ".join(f"{s:.2f}" for s in m["iteration_selection_wall_s"])
shared = ", ".join(f"{s:.2f}" for s in m["iteration_selection_shared_wall_s"])
print(f"{sys.argv[2]:<24} wall {m['wall_time_s']:8.1f} s   selection stage per iteration [{stage}] s"
      f" (shared part [{shared}] s)   peak RSS {m['peak_rss_bytes'] / 2**30:.2f} GiB")
PY
}

run oktopk_p64_dense "$here/oktopk_p64.json" dense
run oktopk_p64_candidates "$here/oktopk_p64.json" candidates
"$python" - "$out/oktopk_p64_dense/results.csv" "$out/oktopk_p64_candidates/results.csv" <<'PY'
import csv, sys
rows = [{r["iteration"]: r for r in csv.DictReader(open(f)) if r["phase"] == "total"} for f in sys.argv[1:]]
print("iteration  bytes_recv_max dense/candidates   bytes_recv_mean dense/candidates   result_nnz dense/candidates")
for it in sorted(rows[0], key=int):
    d, c = rows[0][it], rows[1][it]
    print(f"{it:>9}  {d['bytes_recv_max']:>14} / {c['bytes_recv_max']:<12} {float(d['bytes_recv_mean']):>14.0f} / "
          f"{float(c['bytes_recv_mean']):<12.0f} {d['result_nnz']:>10} / {c['result_nnz']}")
PY
if [ "${P4096:-1}" != 0 ]; then
  run gtopk_p4096 "$here/gtopk_p4096.json"
fi
