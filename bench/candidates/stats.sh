#!/usr/bin/env bash
# `sparsim stats` of the calibrated source, dense and candidates generations side by side, for the VGG-16, LSTM
# and BERT-base tables: the raw-gradient figures the candidates generation measures (docs/gradients.md).
#
#   bash bench/candidates/stats.sh [BUILD_DIR] [RANKS] [N]     (defaults: build, 64, 262144; 1% density,
#                                                               24 iterations, re-evaluation every 16)
set -euo pipefail
build="${1:-build}"
ranks="${2:-64}"
n="${3:-262144}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
python="$(command -v -p python3)"
for model in vgg16 lstm_an4 bert_base; do
  for generation in dense candidates; do
    cat > "$out/$model-$generation.json" <<JSON
{"seed": 11, "ranks": $ranks, "topology": {"type": "star", "nodes": $ranks, "bandwidth": "10Gbps", "latency": "1us"},
 "algorithm": {"name": "oktopk"}, "workload": {"n": $n, "density": 0.01},
 "gradients": {"source": "calibrated", "model": "$model", "generation": "$generation"},
 "selection": {"residual": "none", "reevaluate_every": 16}}
JSON
    "$build/sparsim" stats "$out/$model-$generation.json" --iterations 24 --warmup 0 > "$out/$model-$generation.txt"
  done
  "$python" - "$model" "$out/$model-dense.txt" "$out/$model-candidates.txt" <<'PY'
import sys
def raw(path):
    lines = open(path).read().split("raw gradients")[1].splitlines()[1:]
    out = {}
    for line in lines:
        if "real:" not in line:
            break
        name, value = line.rsplit("real:", 1)[0].rsplit(None, 1)
        out[name.strip()] = float(value)
    return out
d, c = raw(sys.argv[2]), raw(sys.argv[3])
print(f"{sys.argv[1]}:")
for name in d:
    if name == "kurtosis":
        continue  # of whole gradients: not measured from candidates
    ratio = c[name] / d[name] if d[name] else float("nan")
    print(f"  {name:<54} dense {d[name]:>8.4g}  candidates {c[name]:>8.4g}  ratio {ratio:.3f}")
PY
done
