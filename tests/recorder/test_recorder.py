"""The recorder (python/sparsim_record) on a tiny CNN, then its recording replayed by `sparsim run`.

Usage: test_recorder.py in_process|ddp SPARSIM_BINARY SCRATCH_FOLDER   (run by run_recorder_test.sh)

in_process: SimulatedDataParallel with one shared model (float32, steps 1-3 of 5 recorded) and with
    replicas (float16, sparsified updates). Every recorded file is the gradient torch computes for that
    rank's batch from the step's parameters, flattened in model.parameters() order; the update left in .grad
    is the ranks' mean (or the mean of their top-k with error feedback, recomputed here); the sidecar's
    layer table lists the parameters in order with their sizes and kinds.
ddp: record_ddp on DistributedDataParallel over gloo, 2 processes on this host, with small buckets (DDP
    rebuilds them after the first step, in another order): each rank's files equal the gradient of its batch
    in model.parameters() order.
Both replay the recording through `sparsim run` (TopkA, compute.training "model"): the run succeeds on the
recorded n and ranks, charges the sidecar's measured training step, and every iteration's result has the
size of the union of the ranks' top-k with error feedback computed here from the files.
"""

import copy
import csv
import gc
import json
import os
import socket
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import sparsim_record
from sparsim_record import SimulatedDataParallel, record_ddp

BATCH = 8
KINDS = ["conv", "bias", "norm", "norm", "fc", "bias", "fc", "bias"]  # of tiny_model's parameters


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 6 * 6, 8),
                         nn.ReLU(), nn.Linear(8, 10))


def loss_fn(model, batch):
    images, labels = batch
    return F.cross_entropy(model(images), labels)


def random_batch(generator):
    return torch.randn(BATCH, 1, 8, 8, generator=generator), torch.randint(0, 10, (BATCH,), generator=generator)


def reference_gradient(model, batch):
    """The gradient of loss_fn on a copy of `model`, in model.parameters() order (float32 numpy)."""
    copied = copy.deepcopy(model)
    copied.zero_grad(set_to_none=True)
    loss_fn(copied, batch).backward()
    return torch.cat([p.grad.reshape(-1) for p in copied.parameters()]).numpy()


def grad_vector(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_sidecar(folder, model, ranks, iterations, first_step, dtype, recorder):
    """The sidecar describes the files and lists the parameters in model.parameters() order."""
    sidecar = json.load(open(os.path.join(folder, sparsim_record.SIDECAR)))
    expected = {"files": "it{iteration}_rank{rank}.npy", "n": sum(p.numel() for p in model.parameters()),
                "ranks": ranks, "iterations": iterations, "first_step": first_step, "batch": BATCH, "dtype": dtype,
                "recorder": recorder}
    for key, value in expected.items():
        check(sidecar[key] == value, f"sidecar {key}: {sidecar[key]!r}, expected {value!r}")
    layers = sidecar["model"]["layers"]
    named = list(model.named_parameters())
    check([l["name"] for l in layers] == [name for name, _ in named], f"layer names {[l['name'] for l in layers]}")
    check([l["size"] for l in layers] == [p.numel() for _, p in named], "layer sizes differ from the parameters")
    check([l["shape"] for l in layers] == [list(p.shape) for _, p in named], "layer shapes differ")
    check([l["kind"] for l in layers] == KINDS, f"kinds {[l['kind'] for l in layers]}, expected {KINDS}")
    check([l.get("output", False) for l in layers] == [False] * 6 + [True] * 2, "the output layer is not the last "
          "linear layer's weight and bias")
    check(sidecar["model"]["flatten_order"] == "forward" and sidecar["model"]["total"] == expected["n"],
          "table order or total")
    files = sorted(name for name in os.listdir(folder) if name.endswith(".npy"))
    expected_files = sorted(f"it{i}_rank{r}.npy" for i in range(iterations) for r in range(ranks))
    check(files == expected_files, f"files {files}, expected {expected_files}")
    return sidecar


def load(folder, iteration, rank, dtype):
    values = np.load(os.path.join(folder, f"it{iteration}_rank{rank}.npy"))
    check(values.dtype == np.dtype(dtype) and values.ndim == 1, f"{values.dtype}, {values.shape}")
    return values


def record_shared_model(folder):
    """One model, 3 ranks, 5 steps, steps 1-3 recorded in float32."""
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    simulated = SimulatedDataParallel(model, 3, folder, start=1, max_iterations=3)
    generator = torch.Generator().manual_seed(1)
    for step in range(5):
        batches = [random_batch(generator) for _ in range(3)]
        expected = [reference_gradient(model, batch) for batch in batches]
        simulated.step(batches, loss_fn)
        np.testing.assert_allclose(grad_vector(model), np.mean(expected, axis=0), rtol=1e-5, atol=1e-8,
                                   err_msg=f"step {step}: the update is not the ranks' mean")
        if 1 <= step <= 3:
            for rank in range(3):
                np.testing.assert_allclose(load(folder, step - 1, rank, "float32"), expected[rank], rtol=1e-6,
                                           atol=1e-9, err_msg=f"step {step}, rank {rank}")
        optimizer.step()
    return check_sidecar(folder, model, 3, 3, 1, "float32", "simulated")


def record_sparsified_replicas(folder):
    """Two replicas, float16, sparsified updates (top-k with error feedback), 3 steps."""
    replicas = [tiny_model(), tiny_model()]
    optimizers = [torch.optim.SGD(r.parameters(), lr=0.1) for r in replicas]
    density = 0.05
    simulated = SimulatedDataParallel(replicas, 2, folder, dtype="float16", sparsify=density)
    n = sum(p.numel() for p in replicas[0].parameters())
    k = int(density * n)
    residuals = [np.zeros(n, dtype=np.float32) for _ in replicas]
    generator = torch.Generator().manual_seed(2)
    for step in range(3):
        batches = [random_batch(generator) for _ in replicas]
        expected = [reference_gradient(replica, batch) for replica, batch in zip(replicas, batches)]
        simulated.step(batches, loss_fn)
        # The update: each rank's top-k of residual + gradient, averaged; the rest stays in the residual.
        update = np.zeros(n, dtype=np.float32)
        for rank in range(2):
            accumulated = residuals[rank] + expected[rank]
            chosen = np.argsort(-np.abs(accumulated), kind="stable")[:k]
            update[chosen] += accumulated[chosen]
            accumulated[chosen] = 0
            residuals[rank] = accumulated
        for rank, replica in enumerate(replicas):
            np.testing.assert_allclose(grad_vector(replica), update / 2, rtol=1e-5, atol=1e-7,
                                       err_msg=f"step {step}, replica {rank}: not the sparsified update")
            check(np.count_nonzero(grad_vector(replica)) <= 2 * k, "more nonzero updates than 2 k")
            np.testing.assert_array_equal(load(folder, step, rank, "float16"), expected[rank].astype(np.float16),
                                          err_msg=f"step {step}, rank {rank}")
        for optimizer in optimizers:
            optimizer.step()
    sidecar = check_sidecar(folder, replicas[0], 2, 3, 0, "float16", "simulated")
    check(sidecar["sparsified"] == {"density": density, "k": k, "error_feedback": True},
          f"sparsified: {sidecar['sparsified']}")
    return sidecar


def ddp_worker(rank, world, port, folder, references):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    # Buckets of at most 1000 bytes (the first one too): DDP starts with one bucket holding the parameters in
    # reverse, then rebuilds several in the order their gradients became ready.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1000
    model = tiny_model()
    ddp_model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    record_ddp(ddp_model, folder, batch_size=BATCH, max_iterations=3)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(10 + rank)
    for step in range(4):
        batch = random_batch(generator)
        np.save(os.path.join(references, f"it{step}_rank{rank}.npy"), reference_gradient(model, batch))
        optimizer.zero_grad()
        loss_fn(ddp_model, batch).backward()
        optimizer.step()
    rebuilt = ddp_model._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    check(len(rebuilt.split(",")) >= 2, f"DDP rebuilt its buckets as {rebuilt!r}: expected several")
    # The DDP model (its reducer holds the Python hook) goes before the process group: in the other order
    # torch 1.13 can deadlock at teardown with any Python communication hook (docs/gradients.md).
    del ddp_model, optimizer
    gc.collect()
    dist.destroy_process_group()


def record_ddp_run(folder):
    import torch.multiprocessing as mp

    references = folder + "-references"
    os.makedirs(references, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(ddp_worker, args=(2, port, folder, references), nprocs=2)
    for step in range(3):
        for rank in range(2):
            np.testing.assert_allclose(load(folder, step, rank, "float32"),
                                       np.load(os.path.join(references, f"it{step}_rank{rank}.npy")), rtol=1e-6,
                                       atol=1e-9, err_msg=f"step {step}, rank {rank}")
    return check_sidecar(folder, tiny_model(), 2, 3, 0, "float32", "ddp_hook")


def seconds(duration):
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    for unit in sorted(units, key=len, reverse=True):
        if duration.endswith(unit):
            return float(duration[:-len(unit)]) * units[unit]
    raise ValueError(duration)


def replay(sparsim, folder, sidecar, scratch, name):
    """Runs TopkA on the recording and checks the run against the files."""
    n, ranks, iterations = sidecar["n"], sidecar["ranks"], sidecar["iterations"]
    config = {
        "name": name, "ranks": ranks, "iterations": iterations,
        "topology": {"type": "star", "nodes": ranks, "bandwidth": "10GBps", "latency": "1us"},
        "algorithm": {"name": "topka"},
        "workload": {"n": n, "density": 0.05},
        "gradients": {"source": "replay", "files": os.path.join(folder, sparsim_record.FILES), "loop": False,
                      "ranks": "error"},
        "compute": {"training": "model"},
    }
    config_path = os.path.join(scratch, name + ".json")
    out = os.path.join(scratch, name + "-out")
    with open(config_path, "w") as f:
        json.dump(config, f)
    run = subprocess.run([sparsim, "run", config_path, "--out", out, "--quiet"], capture_output=True, text=True)
    check(run.returncode == 0, f"sparsim run exited {run.returncode}: {run.stdout}{run.stderr}")

    manifest = json.load(open(os.path.join(out, "manifest.json")))
    check(manifest["config"]["workload"]["n"] == n and manifest["config"]["ranks"] == ranks,
          "the manifest's n or ranks")
    check(manifest["iterations_completed"] == iterations, "iterations completed")
    check(manifest["verification"]["checked"], "the run's results were not verified")
    expected_step = seconds(sidecar["model"]["compute"]["forward_backward"])
    check(abs(manifest["config"]["compute"]["forward_backward_s"] - expected_step) <= 1e-12,
          f"forward_backward_s {manifest['config']['compute']['forward_backward_s']}, the sidecar's {expected_step}")

    # Oracle: each rank's exact top-k of residual + recorded gradient; the result is the union of the selections.
    totals = [row for row in csv.DictReader(open(os.path.join(out, "results.csv"))) if row["phase"] == "total"]
    check(len(totals) == iterations, f"{len(totals)} iterations in results.csv")
    k = int(totals[0]["k"])
    residuals = [np.zeros(n, dtype=np.float32) for _ in range(ranks)]
    for iteration in range(iterations):
        selected = set()
        for rank in range(ranks):
            residuals[rank] += load(folder, iteration, rank, sidecar["dtype"]).astype(np.float32)
            chosen = np.argsort(-np.abs(residuals[rank]), kind="stable")[:k]
            selected.update(chosen.tolist())
            residuals[rank][chosen] = 0
        check(int(totals[iteration]["result_nnz"]) == len(selected),
              f"iteration {iteration}: result_nnz {totals[iteration]['result_nnz']}, the union of top-k is "
              f"{len(selected)}")
    print(f"{name}: replayed {iterations} iterations of {ranks} ranks, n = {n}, k = {k}")


def main():
    mode, sparsim, scratch = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    torch.set_num_threads(1)
    if mode == "in_process":
        shared = os.path.join(scratch, "shared")
        replay(sparsim, shared, record_shared_model(shared), scratch, "replay_shared")
        replicas = os.path.join(scratch, "replicas")
        replay(sparsim, replicas, record_sparsified_replicas(replicas), scratch, "replay_replicas")
    elif mode == "ddp":
        folder = os.path.join(scratch, "ddp")
        replay(sparsim, folder, record_ddp_run(folder), scratch, "replay_ddp")
    else:
        raise SystemExit(f"unknown mode {mode!r}: in_process or ddp")


if __name__ == "__main__":
    main()
