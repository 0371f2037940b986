"""Writes the GPU-cluster study's grid (docs/study-gpu-clusters.md): sweep.json, and the CI version
../ci_small/gpu_clusters.json.

VGG-16 (calibrated gradients, full size n = 14,728,266, density 2%, the dense residual) on three machines side
by side, each with its own device: Piz Daint (Aries dragonfly, one P100 per node, fp32), the H100-class
rail-optimized fat tree (8 H100 per node, NVSwitch, mixed precision) and the Slingshot dragonfly (4 A100 per
node, NVLink mesh, mixed precision). Every sparse algorithm, the flat dense ring, and on the multi-GPU machines
the node-aware dense allreduce (ranks_per_node = the machine's GPUs per node). Points are listed explicitly
(dense_hierarchical's parameter depends on the machine) and ordered by P, so an interrupted sweep (resumed with
--resume) has the small P complete first. After them, the Slingshot machine again with adaptive routing
(UGAL-style, as Slingshot routes; it needs the link-level network model): minimal routing puts all traffic
between two switches of a group on their one link. Then P = 64 for the dense baselines and the three sparse
algorithms that lead at P = 32 or show the trend (TopkA, gTopk, Ok-Topk), on Piz Daint, the H100 machine and
Slingshot with adaptive routing (a point of full VGG-16 at P = 64 takes about 80 s and 4 GiB), and last the
other two sparse algorithms (SparCML's DSAR, Gaussiank) at P = 64; then P = 128 and P = 256 in the same two steps
(about 8 and 15 GiB a point: run them with --jobs 1 on a 24 GiB machine). Last P = 512 for the dense baselines,
TopkA, gTopk and Ok-Topk, whose sparse points draw the candidates generation with the mean-field residual (the
dense residuals would need 28 GiB); residual_check.json runs gTopk and Ok-Topk at P = 256 on Piz Daint that way,
to compare the two residual models where both fit.
Usage: python3 make_sweep.py  (from this folder; rewrites sweep.json, residual_check.json and
../ci_small/gpu_clusters.json)
"""
import json

MACHINES = [
    {"topology.file": "../../platforms/piz_daint.json", "compute.device": "p100", "compute.precision": "fp32"},
    {"topology.file": "../../platforms/rail_h100.json", "compute.device": "h100", "compute.precision": "mixed"},
    {"topology.file": "../../platforms/slingshot.json", "compute.device": "a100", "compute.precision": "mixed"},
]
ADAPTIVE_SLINGSHOT = dict(MACHINES[2], **{"topology.routing": "adaptive", "network.model": "LinkLevel"})
GPUS_PER_NODE = {"piz_daint": 1, "rail_h100": 8, "slingshot": 4}
ALGORITHMS = [
    {"algorithm.name": "dense_ring", "workload.data": "phantom"},
    {"algorithm.name": "dense_hierarchical", "workload.data": "phantom"},
    {"algorithm.name": "topka"},
    {"algorithm.name": "gtopk"},
    {"algorithm.name": "sparcml_dsar_split_allgather"},
    {"algorithm.name": "gaussiank"},
    {"algorithm.name": "oktopk", "algorithm.global_rules": "vgg"},
]
LARGE_P_ALGORITHMS = [a for a in ALGORITHMS if a["algorithm.name"] in
                      ("dense_ring", "dense_hierarchical", "topka", "gtopk", "oktopk")]
OTHER_ALGORITHMS = [a for a in ALGORITHMS if a not in LARGE_P_ALGORITHMS]
# From P = 512 on, P dense residuals of full VGG-16 (P n floats, 28 GiB at P = 512) exceed the machine: the
# sparse algorithms' gradients come from the candidates generation with the mean-field residual (docs/gradients.md).
SCALE_MODE = {"gradients.generation": "candidates", "selection.residual": "mean_field"}


def at_scale(algorithms):
    return [a if a["algorithm.name"].startswith("dense") else dict(a, **SCALE_MODE) for a in algorithms]


def base(n, iterations):
    return {
        "name": "gpu_clusters",
        "seed": 1,
        "ranks": 16,
        "iterations": iterations,
        "topology": {"file": "../../platforms/piz_daint.json"},
        "algorithm": {"name": "oktopk"},
        "workload": {"n": n, "density": 0.02},
        "gradients": {"source": "calibrated", "model": "vgg16"},
        "selection": {"rules": "vgg"},
        "compute": {"training": "model", "selection": "memory_bandwidth"},
        "simulation": {"verify": False},
    }


def grid(ranks_list, machines, algorithms=ALGORITHMS):
    points = []
    for ranks in ranks_list:
        for machine in machines:
            gpus = GPUS_PER_NODE[machine["topology.file"].split("/")[-1][:-5]]
            for algorithm in algorithms:
                if algorithm["algorithm.name"] == "dense_hierarchical":
                    if gpus == 1:
                        continue  # one GPU per node: the dense ring
                    algorithm = dict(algorithm, **{"algorithm.ranks_per_node": gpus})
                points.append(dict({"ranks": ranks}, **machine, **algorithm))
    return points


def write(path, document):
    with open(path, "w") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


# The study: P = 16 and 32, three iterations (the first re-evaluates Ok-Topk's thresholds, the next two reuse them).
write("sweep.json", {"name": "gpu_clusters", "base": base(14728266, 3), "points": grid([16, 32], MACHINES) + grid([16, 32], [ADAPTIVE_SLINGSHOT])
                                   + grid([64], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], LARGE_P_ALGORITHMS)
                                   + grid([64], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], OTHER_ALGORITHMS)
                                   + grid([128], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], LARGE_P_ALGORITHMS)
                                   + grid([128], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], OTHER_ALGORITHMS)
                                   + grid([256], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], LARGE_P_ALGORITHMS)
                                   + grid([256], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], OTHER_ALGORITHMS)
                                   + grid([512], [MACHINES[0], MACHINES[1], ADAPTIVE_SLINGSHOT], at_scale(LARGE_P_ALGORITHMS))})
# The switch of residual model at P = 512, checked where both fit: Ok-Topk and gTopk at P = 256 on Piz Daint with the
# mean-field residual, beside the sweep's dense-residual points.
write("residual_check.json", {"name": "gpu_clusters_residual_check", "base": base(14728266, 3),
                              "points": grid([256], [MACHINES[0]], at_scale([a for a in ALGORITHMS if a["algorithm.name"] in ("gtopk", "oktopk")]))})
# CI: P = 8 and 16 on a 2^20-entry slice of the model, two iterations.
ci = base(2**20, 2)
ci["name"] = "ci_gpu_clusters"
write("../ci_small/gpu_clusters.json", {"name": "ci_gpu_clusters", "base": ci, "points": grid([8, 16], MACHINES) + grid([16], [ADAPTIVE_SLINGSHOT])})
