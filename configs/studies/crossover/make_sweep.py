"""Writes the crossover study's grids (docs/study-oktopk.md, "Latency against bandwidth"): sweep.json
(P = 32..512 under SimGrid's flows, the reference model) and large.json (P = 512..4096 under the link-level
model, for the two sizes at which Ok-Topk is ever the fastest, density 1%; P = 512 is in both, the bridge).

Points (P, n, algorithm) are listed explicitly because the grid is not a full product: SparCML's split
allgather runs only up to P = 128 (a point at P = 256 took 100 s of CPU, about 8x that at P = 512). Each
point runs on both platforms (and in sweep.json both densities: the axes). Points are ordered by P, so an interrupted
sweep (resumed with --resume) has the small-P grid complete first.
Usage: python3 make_sweep.py  (from this folder; rewrites sweep.json and large.json)
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

# The large grid: the link-level model, which the flow model's cost per message rules out beyond P = 512
# (docs/network-models.md); n = 2^20 and 2^22 at density 1% (k = 10,485 and 41,943), the only cases of the
# small grid where Ok-Topk is the fastest at some P. The dense ring (phantom data: its iterations are the same)
# runs one iteration: at P = 4096 one takes about 3 minutes.
LARGE_RANKS = [512, 1024, 2048, 4096]
LARGE_SIZES = [2**20, 2**22]
LARGE_SPARCML_MAX_RANKS = 1024


def grid(ranks_list, sizes, sparcml_max_ranks, dense_ring_extra):
    points = []
    for ranks in ranks_list:
        for n in sizes:
            for algorithm in ALGORITHMS:
                name = algorithm["algorithm.name"]
                if name.startswith("sparcml") and ranks > sparcml_max_ranks:
                    continue
                extra = dense_ring_extra if name == "dense_ring" else {}
                points.append({"ranks": ranks, "workload.n": n, **algorithm, **extra})
    return points


BASE = {
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
}
PLATFORMS = [
    {"topology.file": "../../platforms/piz_daint.json"},
    {"topology.file": "../../platforms/fat_tree_4096.json"},
]

sweeps = {
    "sweep.json": {
        "name": "crossover",
        "base": BASE,
        "axes": {"@topology": PLATFORMS, "workload.density": [0.001, 0.01]},
        "points": grid(RANKS, SIZES, SPARCML_MAX_RANKS, {}),
    },
    "large.json": {
        "name": "crossover_large",
        "base": {**BASE, "name": "crossover_large", "network": {"model": "LinkLevel"}},
        "axes": {"@topology": PLATFORMS},
        "points": grid(LARGE_RANKS, LARGE_SIZES, LARGE_SPARCML_MAX_RANKS, {"iterations": 1}),
    },
}

for file, sweep in sweeps.items():
    with open(file, "w") as out:
        out.write("{\n")
        for key in ("name", "base", "axes"):
            out.write(f'  "{key}": {json.dumps(sweep[key])},\n')
        out.write('  "points": [\n')
        out.write(",\n".join(f"    {json.dumps(point)}" for point in sweep["points"]))
        out.write("\n  ]\n}\n")
    runs = len(sweep["points"])
    for values in sweep["axes"].values():
        runs *= len(values)
    print(f"{file}: {len(sweep['points'])} points, {runs} runs")
