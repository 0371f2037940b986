"""Reading a sparsim sweep folder for the notebooks: summary.csv, the points' manifests, ranks.csv and
links.csv, and where figures go.

A sweep folder DIR (from `sparsim sweep SWEEP.json --out DIR`) holds summary.csv (one row per point,
iteration and phase; the point's coordinates in "axis:..." columns, then the columns of results.csv) and
points/NNNN/ with results.csv, ranks.csv, links.csv and manifest.json per complete point (points run by
older versions may lack links.csv). The notebooks find DIR in the environment variable SPARSIM_SWEEP_DIR
and write figures to SPARSIM_FIGURES_DIR (default DIR/figures).
"""
import json
import os
from pathlib import Path

import pandas as pd

WORD_BYTES = 4  # a word is 4 bytes, as in results.csv's lower_bound_bytes


def sweep_dir(default="../results/ci_small"):
    folder = Path(os.environ.get("SPARSIM_SWEEP_DIR", default)).resolve()
    if not (folder / "summary.csv").exists():
        raise FileNotFoundError(f"{folder} holds no summary.csv: run `sparsim sweep SWEEP.json --out {folder}` "
                                "first, or point SPARSIM_SWEEP_DIR at a sweep folder")
    return folder


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
