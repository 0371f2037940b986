"""Reading a sparsim sweep folder for the notebooks: summary.csv, the points' manifests, ranks.csv and
links.csv, and where figures go.

A sweep folder DIR (from `sparsim sweep SWEEP.json --out DIR`) holds summary.csv (one row per point,
iteration and phase; the point's coordinates in "axis:..." columns, then the columns of results.csv) and
points/NNNN/ with results.csv, ranks.csv, links.csv and manifest.json per complete point (points run by
older versions may lack links.csv). The notebooks find DIR in the environment variable SPARSIM_SWEEP_DIR
(5_time_to_accuracy: SPARSIM_TTA_DIR) and write figures to SPARSIM_FIGURES_DIR (default DIR/figures).
Sweeps of the closed-loop training source (gradients.source "fashion_mnist_mlp") also carry the training
log in each manifest's "training" array, read by training_curves().
"""
import json
import os
from pathlib import Path

import pandas as pd

WORD_BYTES = 4  # a word is 4 bytes, as in results.csv's lower_bound_bytes


def sweep_dir(default="../results/ci_small", variable="SPARSIM_SWEEP_DIR", needs="summary.csv"):
    """The sweep folder named by the environment variable `variable`, else `default`; it must hold `needs`."""
    folder = Path(os.environ.get(variable, default)).resolve()
    if not (folder / needs).exists():
        raise FileNotFoundError(f"{folder} holds no {needs}: run `sparsim sweep SWEEP.json --out {folder}` "
                                f"first, or point {variable} at a sweep folder")
    return folder


def optional_sweep_dir(default, variable, needs="summary.csv"):
    """As sweep_dir, for a sweep a notebook can do without: None when `variable` is unset and `default` holds
    no `needs` (a set variable must name a sweep folder)."""
    if variable not in os.environ and not (Path(default) / needs).exists():
        return None
    return sweep_dir(default, variable, needs)


def figures_dir(sweep):
    folder = Path(os.environ.get("SPARSIM_FIGURES_DIR", sweep / "figures")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save(fig, folder, name):
    """Saves a figure as NAME.png and NAME.pdf and returns the PNG's path."""
    for suffix in ("png", "pdf"):
        fig.savefig(folder / f"{name}.{suffix}", dpi=150, bbox_inches="tight")
    return folder / f"{name}.png"


def variant_label(algorithm):
    """An algorithm's label from its resolved config: the name plus the Ok-Topk ablations that are on."""
    label = algorithm["name"]
    if label == "oktopk":
        off = []
        if algorithm.get("partition") == "static":
            off.append("static partition")
        if algorithm.get("balancing") is False:
            off.append("no data balancing")
        label += f" ({', '.join(off)})" if off else ""
    if label == "spardl" and algorithm.get("teams", 1) > 1:
        label += f" ({algorithm['teams']} teams)"
    return label


def points(sweep):
    """One row per complete point: its folder and, from its manifest, algorithm label, topology, P, n, k."""
    rows = []
    for folder in sorted((sweep / "points").iterdir()):
        manifest_file = folder / "manifest.json"
        if not manifest_file.exists():
            continue
        config = json.loads(manifest_file.read_text())["config"]
        workload = config["workload"]
        rows.append({
            "point": int(folder.name),
            "folder": folder,
            "algorithm": config["algorithm"]["name"],
            "variant": variant_label(config["algorithm"]),
            "topology": config["topology"].get("type", "?"),
            "P": config["ranks"],
            "n": workload["n"],
            "k": int(workload["density"] * workload["n"]),
        })
    return pd.DataFrame(rows)


def summary(sweep):
    """summary.csv with each point's algorithm label (variant), P and k = floor(density * n)."""
    table = pd.read_csv(sweep / "summary.csv").drop(columns="k")
    table["P"] = table["ranks"]
    return table.merge(points(sweep)[["point", "variant", "k"]], on="point")


def ranks(point_folder):
    return pd.read_csv(point_folder / "ranks.csv")


def training_label(config):
    """A training run's label from its resolved config: variant_label, plus tau' (iterations between exact
    threshold re-evaluations) where the local selection reuses thresholds."""
    label = variant_label(config["algorithm"])
    selection = config.get("selection", {})
    if config["algorithm"]["name"] != "dense_ring" and selection.get("policy") == "threshold_reuse":
        label += f", tau' = {selection['reevaluate_every']}"
    return label


def iteration_times(point_folder):
    """One row per iteration of a point: its simulated time (results.csv's `total` row: the slowest rank's
    iteration; ranks start every iteration aligned) and `start_s`, the simulated time at which it starts
    (the sum of the iterations before it)."""
    table = pd.read_csv(point_folder / "results.csv")
    total = table[table["phase"] == "total"].sort_values("iteration")
    times = pd.DataFrame({"iteration": total["iteration"].to_numpy(), "sim_time_s": total["sim_time_s"].to_numpy()})
    times["start_s"] = times["sim_time_s"].cumsum() - times["sim_time_s"]
    return times


def training_curves(sweep):
    """One row per (point, evaluated iteration) of a sweep of the training source: the point's label and P,
    the iteration i, test_accuracy and test_loss of the weights w_i (after i updates) and `sim_time_s`, the
    simulated time at which w_i exists: the sum of the times of iterations 0 .. i-1 (so 0 at i = 0)."""
    rows = []
    for point in points(sweep).itertuples():
        manifest = json.loads((point.folder / "manifest.json").read_text())
        times = iteration_times(point.folder).set_index("iteration")["start_s"]
        for entry in manifest["training"]:
            if "test_accuracy" in entry:
                rows.append({
                    "point": point.point,
                    "label": training_label(manifest["config"]),
                    "P": point.P,
                    "iteration": entry["iteration"],
                    "test_accuracy": entry["test_accuracy"],
                    "test_loss": entry["test_loss"],
                    "sim_time_s": times[entry["iteration"]],
                })
    return pd.DataFrame(rows)


def time_to_target(curves, target):
    """Per point: the first evaluated iteration whose test accuracy reaches `target` and the simulated time
    at which its weights exist (NaN where no evaluation reaches it). Evaluations every eval_every iterations
    make this an upper bound, late by less than eval_every iterations."""
    reached = curves[curves["test_accuracy"] >= target].sort_values("iteration").groupby("point").first()
    table = curves.groupby("point")[["label", "P"]].first()
    table["iteration"] = reached["iteration"]
    table["time_s"] = reached["sim_time_s"]
    return table


# The Ok-Topk study (notebooks/6_oktopk_study.ipynb, docs/study-oktopk.md): a sweep folder that may be partly run,
# each point's iterations split into compute, sparsification and communication, and Ok-Topk's amortised time.

WORKLOADS = {"vgg16": "VGG-16", "lstm_an4": "LSTM", "bert_base": "BERT-base"}
STUDY_VARIANTS = ["dense_ring", "dense_rabenseifner", "topka", "gtopk", "sparcml_dsar_split_allgather", "gaussiank",
                  "spardl", "oktopk", "oktopk (no data balancing)"]


def study_dir(variable="SPARSIM_OKTOPK_DIR", default="../results/oktopk"):
    """The study's sweep folder from the environment variable VARIABLE: it needs points/ (the sweep writes every
    point's config.json there when it starts), not summary.csv, so a sweep still running or stopped can be read."""
    return sweep_dir(default, variable, needs="points")


def point_complete(folder):
    """As the sweep decides: the run wrote its manifest and did not stop early (not `partial`)."""
    manifest_file = folder / "manifest.json"
    return manifest_file.exists() and not json.loads(manifest_file.read_text()).get("partial", False)


def reduction_label(compute):
    """How a point charges reductions inside the collectives (config `compute`): "free", or the bandwidth they
    are charged at, as written in the config (`reduction_bandwidth`, else `memory_bandwidth`, else the default)."""
    if compute.get("reduction", "free") == "free":
        return "free"
    return compute.get("reduction_bandwidth", compute.get("memory_bandwidth", "732GBps"))


def study_points(sweep):
    """One row per point of the sweep, complete or not, from its config.json: workload (the calibrated gradients'
    model), P, variant, reduction_rate (reduction_label), routing (topology.routing, "minimal" when not set) and
    whether it is complete."""
    rows = []
    for folder in sorted((sweep / "points").iterdir()):
        config = json.loads((folder / "config.json").read_text())
        model = config.get("gradients", {}).get("model", "vgg16")
        rows.append({
            "point": int(folder.name),
            "folder": folder,
            "workload": WORKLOADS.get(model, model),
            "P": config["ranks"],
            "variant": variant_label(config["algorithm"]),
            "reduction_rate": reduction_label(config.get("compute", {})),
            "routing": config.get("topology", {}).get("routing", "minimal"),
            "complete": point_complete(folder),
        })
    return pd.DataFrame(rows)


def study_iterations(points_table):
    """One row per complete point and iteration: the slowest rank's iteration time (`total`) split into compute,
    staging, selection, reduction and communication (the rest, in seconds), the busiest rank's words sent and
    received over k (sparse algorithms), the local selection's m/k (largest over ranks), the point's tau'
    (`selection.reevaluate_every` from the manifest; none for dense algorithms) and its reduction_rate."""
    rows = []
    for point in points_table[points_table["complete"]].itertuples():
        results = pd.read_csv(point.folder / "results.csv")
        selection = json.loads((point.folder / "manifest.json").read_text())["config"].get("selection") or {}
        phase_time = results.pivot_table(index="iteration", columns="phase", values="sim_time_s", aggfunc="sum")
        totals = results[results["phase"] == "total"].set_index("iteration")
        for iteration, total in totals.iterrows():
            parts = {part: phase_time.at[iteration, part] if part in phase_time.columns else 0.0
                     for part in ("compute", "staging", "selection", "reduction")}
            k = total["k"]
            rows.append({
                "point": point.point, "workload": point.workload, "P": point.P, "variant": point.variant,
                "reduction_rate": point.reduction_rate, "routing": point.routing,
                "iteration": iteration, "reevaluation": total["reevaluation"] == 1,
                "tau": selection.get("reevaluate_every"),
                **parts,
                "communication": total["sim_time_s"] - sum(parts.values()),
                "total": total["sim_time_s"],
                "words_sent_per_k": total["bytes_sent_max"] / WORD_BYTES / k,
                "words_recv_per_k": total["bytes_recv_max"] / WORD_BYTES / k,
                "m_per_k": total["local_selected_max"] / k,
            })
    return pd.DataFrame(rows)


def amortise(first, later, tau):
    """Time per iteration over one re-evaluation period of tau' iterations (docs/study-oktopk.md): the first
    iteration re-evaluates, the other tau' - 1 cost as the later ones measured."""
    return (first + (tau - 1) * later) / tau


def study_summary(iterations):
    """One row per point: each part of the iteration (compute, staging, selection, reduction, communication,
    total) in iteration 0 (`first_...`), averaged over the later ones (`later_...`) and per iteration (`..._ms`,
    in milliseconds): amortised over tau' for points whose iteration 0 is a re-evaluation (Ok-Topk), the mean of
    all iterations otherwise. Also the words per rank / k and m/k, first and later."""
    parts = ["compute", "staging", "selection", "reduction", "communication", "total"]
    volumes = ["words_sent_per_k", "words_recv_per_k", "m_per_k"]
    rows = []
    keys = ["workload", "P", "variant", "reduction_rate", "routing"]
    for (workload, P, variant, rate, routing), its in iterations.groupby(keys, sort=False):
        first = its[its["iteration"] == its["iteration"].min()].iloc[0]
        later = its[its["iteration"] > first["iteration"]]
        row = {"workload": workload, "P": P, "variant": variant, "reduction_rate": rate, "routing": routing,
               "iterations": len(its),
               "amortised": bool(first["reevaluation"]) and len(later) > 0 and pd.notna(first["tau"])}
        for column in parts + volumes:
            row[f"first_{column}"] = first[column]
            row[f"later_{column}"] = later[column].mean() if len(later) else float("nan")
        for part in parts:
            per_iteration = (amortise(first[part], later[part].mean(), first["tau"]) if row["amortised"]
                             else its[part].mean())
            row[f"{part}_ms"] = per_iteration * 1e3
        rows.append(row)
    return pd.DataFrame(rows)


def closed_form_points(sweep):
    """points() plus, from each manifest: the density, the resolved algorithm parameters (`params`, a dict),
    the bytes of a sparse element (`element_bytes`) and of a value (`value_bytes`), and the closed form's
    inputs and time: `alpha_s` (the largest latency of a route between two placed ranks), `beta_s_per_byte`
    (1 / the smallest bottleneck bandwidth of such a route) and `model_time_s` (the algorithm's closed form
    with these, as in results.csv's `model_time_s`)."""
    table = points(sweep)
    extra = []
    for folder in table["folder"]:
        manifest = json.loads((folder / "manifest.json").read_text())
        workload = manifest["config"]["workload"]
        closed_form = manifest["closed_form"]
        extra.append({
            "density": workload["density"],
            "params": manifest["config"]["algorithm"],
            "element_bytes": workload["index_bytes"] + workload["value_bytes"],
            "value_bytes": workload["value_bytes"],
            "alpha_s": closed_form["alpha_s"],
            "beta_s_per_byte": closed_form["beta_s_per_byte"],
            "model_time_s": closed_form["time_s"],
        })
    return pd.concat([table, pd.DataFrame(extra, index=table.index)], axis=1)
