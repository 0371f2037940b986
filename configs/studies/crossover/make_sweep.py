"""Writes sweep.json, the crossover study's grid (docs/study-oktopk.md, "Latency against bandwidth").

Points (P, n, algorithm) are listed explicitly because the grid is not a full product: SparCML's split
allgather runs only up to P = 128 (a point at P = 256 took 100 s of CPU, about 8x that at P = 512). Each
point runs on both platforms and both densities (the axes). Points are ordered by P, so an interrupted
sweep (resumed with --resume) has the small-P grid complete first.
Usage: python3 make_sweep.py  (from this folder; rewrites sweep.json)
"""
import json

RANKS = [32, 64, 128, 256, 512]
SIZES = [2**18, 2**20, 2**22]
SPARCML_MAX_RANKS = 128
ALGORITHMS = [
    {"algorithm.name": "dense_ring", "workload.data": "phantom"},
    {"algorithm.name": "topka", "algorithm.allgather": "recursive_doubling"},
    {"algorithm.name": "gtopk"},
    {"algorithm.name": "sparcml_dsar_split_allgather"},
    {"algorithm.name": "oktopk"},
]

points = []
for ranks in RANKS:
    for n in SIZES:
        for algorithm in ALGORITHMS:
            if algorithm["algorithm.name"].startswith("sparcml") and ranks > SPARCML_MAX_RANKS:
                continue
            points.append({"ranks": ranks, "workload.n": n, **algorithm})

sweep = {
    "name": "crossover",
    "base": {
        "name": "crossover",
        "seed": 1,
        "ranks": 32,
        "iterations": 3,
        "topology": {"file": "../../platforms/piz_daint.json"},
        "algorithm": {"name": "oktopk"},
        "workload": {"n": 2**20, "density": 0.01},
        "gradients": {"source": "uniform"},
        "selection": {"reevaluate_every": 32, "residual": "none"},
        "compute": {"training": "none", "selection": "free"},
        "simulation": {"verify": False},
    },
    "axes": {
        "@topology": [
            {"topology.file": "../../platforms/piz_daint.json"},
            {"topology.file": "../../platforms/fat_tree_4096.json"},
        ],
        "workload.density": [0.001, 0.01],
    },
    "points": points,
}

with open("sweep.json", "w") as out:
    out.write("{\n")
    for key in ("name", "base", "axes"):
        out.write(f'  "{key}": {json.dumps(sweep[key])},\n')
    out.write('  "points": [\n')
    out.write(",\n".join(f"    {json.dumps(point)}" for point in points))
    out.write("\n  ]\n}\n")
print(f"sweep.json: {len(points)} points x 2 platforms x 2 densities = {4 * len(points)} runs")
