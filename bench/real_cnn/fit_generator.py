"""Fits the calibrated generator to the recorded gradients of a real CNN, and tables the comparison
(docs/gradients.md, "A real CNN as the oracle").

Inputs: the recordings of bench/real_cnn/record_fmnist_cnn.py (RECORDINGS/P8, RECORDINGS/P16) and sparsim.
For every source (the recording replayed; the calibrated generator on configs/models/resnet_fmnist.json with
candidate parameters; the same with its defaults; the fitted generator with the mean-field residual) and P:

- `sparsim stats --json` (error feedback with the dense residual, exact top-k and Ok-Topk's threshold reuse):
  Jaccard of two ranks' selections, union / (P k), selection kept from the previous iteration (with error
  feedback, and for the raw gradients' top-k), the busiest of P equal index regions over the mean, each layer
  group's share of the top-k (stem, the three stages, the output layer), kurtosis (raw gradients, acc), m / k
  under threshold reuse (median, maximum);
- `sparsim run` of Ok-Topk (a star with the link-level network, `"loop": false` for the recording): medians
  over its threshold-reuse iterations from the warm-up on of |U| / k and the busiest rank's received words.

The fit: bounded Nelder-Mead (SciPy) over heavy_tail, shared_fraction, layer_scale_exponent, iteration_jitter
and noise_tail, from the defaults, minimising the mean over the FITTED statistics of |generator / recorded - 1|
(per-layer shares enter as one term: their total variation distance) at the --fit-ranks. The generator's seed
is fixed (1), so the objective is deterministic; the other parameters keep their defaults. Evaluations are
cached in the work folder by their config (a rerun replays the same fit from the cache and resumes). About
17 s per evaluation at P = 8 on this project's 2-core machine; the mean-field columns about 6 s per iteration.

    PYTHONPATH=python /usr/bin/python3 bench/real_cnn/fit_generator.py RECORDINGS WORK [--sparsim build/sparsim]
        [--fit-ranks 8] [--ranks 8 16] [--mean-field-ranks 8] [--max-evaluations 120] \\
        [--figure docs/figures/real_cnn.png]

writes WORK/fit.json (the fitted parameters and the evaluations) and WORK/table.md, and the figure. Needs
Debian's python3 with NumPy, Matplotlib and SciPy (`apt-get install python3-scipy`; scripts/setup.sh does not
install SciPy, which only this script uses).
"""

import argparse
import csv
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from scipy.optimize import minimize

DENSITY = 0.01
SEED = 1
# Iterations: the residuals build up over WARMUP, statistics are medians over the next MEASURED (the
# recording holds WARMUP + MEASURED = 200); the fit's evaluations measure FIT_MEASURED of them.
WARMUP, MEASURED, FIT_MEASURED = 50, 150, 50
# The fitted parameters, their bounds (docs/config.md) and defaults (docs/gradients.md).
PARAMETERS = {"heavy_tail": (0.0, 3.0, 0.95), "shared_fraction": (0.0, 1.0, 0.05),
              "layer_scale_exponent": (0.0, 2.0, 0.3), "iteration_jitter": (0.0, 3.0, 0.6),
              "noise_tail": (0.0, 3.0, 0.25)}
# Layer groups of FashionResNet, by name prefix.
GROUPS = {"stem": ("stem",), "stage1": ("stage1",), "stage2": ("stage2",), "stage3": ("stage3",), "output": ("fc",)}
# The statistics: key -> label. FITTED enter the objective.
LABELS = {
    "jaccard": "Jaccard of two ranks' selections",
    "union": "union / (P k)",
    "kept": "selection kept from the previous iteration",
    "regions": "busiest of P equal index regions / mean",
    "raw_kept": "raw top-k kept from the previous iteration",
    "layer_distance": "per-layer share: total variation from the recording",
    **{f"share_{g}": f"share of the top-k in {g}" for g in GROUPS},
    "raw_kurtosis": "kurtosis of the raw gradients",
    "acc_kurtosis": "kurtosis of acc (residual + gradient)",
    "reuse_median": "threshold reuse: m / k, median",
    "reuse_max": "threshold reuse: m / k, maximum",
    "oktopk_union": "Ok-Topk |U| / k (run)",
    "oktopk_words": "Ok-Topk busiest rank's words received / k (run)",
}
# The columns compared with the recording.
COLUMNS = ("fitted", "default", "fitted, mean-field")
FITTED = ["jaccard", "union", "kept", "raw_kept", "regions", "layer_distance", "raw_kurtosis", "reuse_median",
          "oktopk_union", "oktopk_words"]


def base_config(ranks, n, iterations):
    """The parts every config shares: P ranks on a star, Ok-Topk, density 1%, the link-level network."""
    return {"seed": SEED, "ranks": ranks, "iterations": iterations,
            "topology": {"type": "star", "nodes": ranks, "bandwidth": "10GBps", "latency": "1us"},
            "algorithm": {"name": "oktopk"}, "workload": {"n": n, "density": DENSITY},
            "network": {"model": "LinkLevel"}, "simulation": {"verify": False}}


def replay_config(recordings, ranks, n, iterations):
    files = os.path.join(os.path.abspath(recordings), f"P{ranks}", "it{iteration}_rank{rank}.npy")
    config = base_config(ranks, n, iterations)
    config["gradients"] = {"source": "replay", "files": files, "loop": False, "ranks": "error"}
    return config


def calibrated_config(params, ranks, n, iterations, mean_field=False):
    config = base_config(ranks, n, iterations)
    config["gradients"] = {"source": "calibrated", "model": "resnet_fmnist", **params}
    if mean_field:
        config["gradients"]["generation"] = "candidates"
        config["selection"] = {"residual": "mean_field"}
    return config


class Sparsim:
    """Runs `sparsim stats` and `sparsim run` on a config and reads the statistics, cached by the config."""

    def __init__(self, binary, work):
        self.binary = binary
        self.work = work
        self.seconds = 0.0  # wall time of the sparsim calls made (not the cached ones)

    def measure(self, config, measured):
        key = hashlib.sha1(json.dumps([config, WARMUP, measured], sort_keys=True).encode()).hexdigest()[:16]
        folder = os.path.join(self.work, "runs", key)
        done = os.path.join(folder, "statistics.json")
        if os.path.exists(done):
            with open(done) as f:
                return json.load(f)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "config.json")
        with open(path, "w") as f:
            json.dump(config, f, indent=1)
        begin = time.perf_counter()
        # Offline statistics (no network).
        self._call("stats", path, "--warmup", str(WARMUP), "--iterations", str(measured),
                   "--json", os.path.join(folder, "stats.json"))
        # Ok-Topk through the network, for |U| / k and the busiest rank's words.
        self._call("run", path, "--out", os.path.join(folder, "run"), "--quiet", "--threads", "1")
        seconds = time.perf_counter() - begin
        self.seconds += seconds
        result = statistics_of(os.path.join(folder, "stats.json"), os.path.join(folder, "run", "results.csv"))
        result["seconds"] = round(seconds, 1)
        with open(done, "w") as f:
            json.dump(result, f, indent=1)
        return result

    def _call(self, *args):
        completed = subprocess.run([self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if completed.returncode != 0:
            sys.exit(f"sparsim {' '.join(args)} failed ({completed.returncode}):\n{completed.stderr}")


def statistics_of(stats_path, results_path):
    """The statistics (LABELS) from `sparsim stats --json` and Ok-Topk's results.csv."""
    with open(stats_path) as f:
        stats = json.load(f)
    ef, raw = stats["error_feedback"], stats["raw"]
    shares = {g: 0.0 for g in GROUPS}
    for layer in stats["layers"]:
        group = next(g for g, prefixes in GROUPS.items() if layer["name"].startswith(prefixes))
        shares[group] += layer["share"] or 0.0
    nan = float("nan")
    out = {"jaccard": ef["jaccard"], "union": ef["union_ratio"], "kept": ef["overlap_previous"],
           "regions": ef["region_imbalance"],
           "raw_kept": raw["overlap_previous"], "raw_kurtosis": raw["kurtosis"], "acc_kurtosis": ef["acc_kurtosis"],
           "reuse_median": stats["threshold_reuse"]["median_ratio"], "reuse_max": stats["threshold_reuse"]["max_ratio"],
           **{f"share_{g}": s for g, s in shares.items()}}
    # Ok-Topk: its threshold-reuse iterations from the warm-up on (as bench/mean_field/validate.sh).
    union, words = [], []
    with open(results_path) as f:
        for row in csv.DictReader(f):
            if row["phase"] == "total" and int(row["iteration"]) >= WARMUP and row["reevaluation"] == "0":
                k = float(row["k"])
                union.append(float(row["result_nnz"]) / k)
                words.append(float(row["bytes_recv_max"]) / 4 / k)
    out["oktopk_union"] = statistics.median(union) if union else nan
    out["oktopk_words"] = statistics.median(words) if words else nan
    return {key: (nan if value is None else value) for key, value in out.items()}


def with_layer_distance(result, target):
    """`result` with its per-layer shares' total variation distance from `target`'s."""
    distance = 0.5 * sum(abs(result[f"share_{g}"] - target[f"share_{g}"]) for g in GROUPS)
    return dict(result, layer_distance=distance)


def relative_errors(result, target):
    """|result / target - 1| per statistic (the layer distance is its own error)."""
    errors = {}
    for key in LABELS:
        if key == "layer_distance":
            errors[key] = result[key]
        elif target[key] and not np.isnan(target[key]):
            errors[key] = abs(result[key] / target[key] - 1)
    return errors


def fit(sparsim, targets, fit_ranks, n, max_evaluations):
    """Bounded Nelder-Mead from the defaults; returns the fitted parameters and the evaluations' log."""
    names = list(PARAMETERS)
    lower = np.array([PARAMETERS[p][0] for p in names])
    upper = np.array([PARAMETERS[p][1] for p in names])
    start = np.array([PARAMETERS[p][2] for p in names])
    log = []

    def objective(x):
        params = {p: round(float(v), 4) for p, v in zip(names, x)}
        errors = []
        for ranks in fit_ranks:
            result = with_layer_distance(
                sparsim.measure(calibrated_config(params, ranks, n, WARMUP + FIT_MEASURED), FIT_MEASURED),
                targets[ranks])
            e = relative_errors(result, targets[ranks])
            errors += [e[key] for key in FITTED]
        value = float(np.mean(errors)) if not np.isnan(errors).any() else 10.0
        log.append({"params": params, "objective": value})
        print(f"evaluation {len(log)}: {params} -> {value:.4f}", flush=True)
        return value

    # The initial simplex: the defaults and, per parameter, a step of a tenth of its range (deterministic).
    simplex = [start] + [np.clip(start + np.eye(len(names))[i] * 0.1 * (upper - lower)[i], lower, upper)
                         for i in range(len(names))]
    found = minimize(objective, start, method="Nelder-Mead", bounds=list(zip(lower, upper)),
                     options={"initial_simplex": np.array(simplex), "maxfev": max_evaluations,
                              "xatol": 0.01, "fatol": 0.002})
    best = min(log, key=lambda entry: entry["objective"])
    return best["params"], log, found.message


def table(columns, targets, ranks_list):
    """The markdown comparison: per P and statistic, the recording and each column with its error (a column
    not measured at that P: "-")."""
    names = list(COLUMNS)
    lines = ["| P | statistic | recorded | " + " | ".join(f"{name} | error" for name in names) + " |",
             "|---|---|---|" + "---|---|" * len(names)]
    for ranks in ranks_list:
        target = targets[ranks]
        for key, label in LABELS.items():
            cells = []
            for name in names:
                result = columns[ranks].get(name)
                value = np.nan if result is None else result[key]
                if key == "layer_distance":
                    error = "-"
                else:
                    error = "-" if np.isnan(value) or not target[key] else f"{value / target[key] - 1:+.0%}"
                cells.append(f"{value:.4g} | {error}" if not np.isnan(value) else "- | -")
            marker = " (fitted)" if key in FITTED else ""
            label = label.replace("|", "\\|")  # a markdown cell
            lines.append(f"| {ranks} | {label}{marker} | {target[key]:.4g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figure(columns, targets, ranks_list, path):
    """Per P, each statistic of each column over the recording's (1 = a match; the 15% band shaded)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [key for key in LABELS if key != "layer_distance"]
    fig, axes = plt.subplots(1, len(ranks_list), figsize=(6.5 * len(ranks_list), 6), sharey=True, squeeze=False)
    for ax, ranks in zip(axes[0], ranks_list):
        y = np.arange(len(keys))
        height = 0.8 / len(COLUMNS)
        for c, name in enumerate(COLUMNS):
            result = columns[ranks].get(name)
            if result is None:
                continue
            ratios = [result[k] / targets[ranks][k] if targets[ranks][k] else np.nan for k in keys]
            ax.barh(y + c * height - 0.4 + height / 2, np.array(ratios) - 1, height, left=1, label=name,
                    color=f"C{c}")
        ax.axvspan(0.85, 1.15, color="0.85", zorder=0)
        ax.axvline(1, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yticks(y, [LABELS[k] for k in keys], fontsize=8)
        ax.set_title(f"P = {ranks}: statistic / recorded (ResNet on Fashion-MNIST, 1%)")
        ax.set_xlabel("ratio to the recorded gradients (log scale; grey: within 15%)")
    axes[0][0].invert_yaxis()  # the first statistic on top (the panels share the axis)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recordings", help="the folder of record_fmnist_cnn.py (holds P8, P16)")
    parser.add_argument("work", help="where configs, runs, fit.json and table.md go")
    parser.add_argument("--sparsim", default="build/sparsim")
    parser.add_argument("--fit-ranks", type=int, nargs="+", default=[8], help="the P the fit runs at")
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16], help="the P the table shows")
    parser.add_argument("--max-evaluations", type=int, default=120)
    parser.add_argument("--mean-field-ranks", type=int, nargs="*", default=[8],
                        help="the P with a mean-field column (about 6 s per iteration at P = 8 on 2 cores)")
    parser.add_argument("--figure", default="docs/figures/real_cnn.png")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sparsim = Sparsim(args.sparsim, args.work)
    begin = time.perf_counter()

    # The targets: the recording replayed with the dense residual.
    targets, n = {}, None
    for ranks in sorted(set(args.ranks) | set(args.fit_ranks)):
        with open(os.path.join(args.recordings, f"P{ranks}", "recording.json")) as f:
            n = json.load(f)["n"]
        targets[ranks] = sparsim.measure(replay_config(args.recordings, ranks, n, WARMUP + MEASURED), MEASURED)
        targets[ranks]["layer_distance"] = 0.0
        # The fit compares with FIT_MEASURED iterations of the generator: the same targets (its medians are
        # stationary) except the maximum, which is not fitted.

    # The fit.
    fitted, log, message = fit(sparsim, targets, args.fit_ranks, n, args.max_evaluations)
    fit_seconds = time.perf_counter() - begin

    # The comparison at every P: fitted, defaults, fitted with the mean-field residual, all over MEASURED.
    defaults = {p: PARAMETERS[p][2] for p in PARAMETERS}
    columns = {}
    for ranks in args.ranks:
        def measure(params, mean_field=False):
            config = calibrated_config(params, ranks, n, WARMUP + MEASURED, mean_field)
            return with_layer_distance(sparsim.measure(config, MEASURED), targets[ranks])
        columns[ranks] = {"fitted": measure(fitted), "default": measure(defaults)}
        if ranks in args.mean_field_ranks:
            columns[ranks]["fitted, mean-field"] = measure(fitted, mean_field=True)
    text = table(columns, targets, args.ranks)
    misses = {ranks: sorted(key for key, e in relative_errors(columns[ranks]["fitted"], targets[ranks]).items()
                            if e > 0.15)
              for ranks in args.ranks}
    with open(os.path.join(args.work, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.work, "fit.json"), "w") as f:
        json.dump({"fitted": fitted, "defaults": defaults, "message": message, "evaluations": log,
                   "misses_over_15_percent": misses, "fit_seconds": round(fit_seconds, 1),
                   "total_seconds": round(time.perf_counter() - begin, 1),
                   "sparsim_seconds": round(sparsim.seconds, 1)}, f, indent=1)
    figure(columns, targets, args.ranks, args.figure)
    print(text)
    print(f"fitted: {fitted}\nmisses over 15%: {misses}\nfit {fit_seconds:.0f} s, "
          f"total {time.perf_counter() - begin:.0f} s")


if __name__ == "__main__":
    main()
