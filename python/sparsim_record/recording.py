"""Writing a recording: one 1-D .npy file per recorded iteration and rank, and the JSON sidecar.

Layout of a recording folder (what sparsim's ``gradients.files`` reads, docs/gradients.md):

    it{iteration}_rank{rank}.npy   rank's flattened gradient of recorded iteration `iteration` (from 0)
    recording.json                 the sidecar: n, ranks, iterations, the training step of iteration 0,
                                   the batch per rank, the dtype, how it was recorded, and the layer table

The sidecar is rewritten after every recorded iteration (under DDP by rank 0, after its own file): a recording
cut short by a crash keeps a sidecar that describes it, and sparsim refuses one whose files are incomplete.
"""

import json
import os
import platform
import re
import tempfile

import numpy as np
import torch

from .layers import layer_table, trained_parameters

FILES = "it{iteration}_rank{rank}.npy"
SIDECAR = "recording.json"
_RECORDED_FILE = re.compile(r"it(0|[1-9][0-9]*)_rank(0|[1-9][0-9]*)\.npy")
_DTYPES = {"float32": torch.float32, "float16": torch.float16}


def _replace_atomically(path, write):
    """Calls write(file object) on a temporary file beside `path`, then renames it to `path`."""
    folder = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def device_description(device):
    """The GPU or CPU the timings were measured on, for the layer table's compute.device."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu} (torch threads: {torch.get_num_threads()})"


def format_duration(seconds):
    """A duration sparsim reads (compute.forward_backward), to 0.1 us: "5.8813ms", "350.1us"."""
    return f"{seconds * 1e3:.4f}ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f}us"


class Recording:
    """The files of one recording in `folder`, and its sidecar.

    model: the (unwrapped) model whose trained parameters are recorded, in model.parameters() order.
    ranks: the data-parallel ranks recorded; batch_size: samples per rank and step.
    dtype: "float32" or "float16" (half the disk space; values beyond float16's range are an error, values
        below its smallest subnormal, 6e-8, become 0).
    start: training steps before the first recorded one; max_iterations: how many steps are recorded at most
        (None: every step from `start` on).
    recorder: how the gradients were made ("ddp_hook" or "simulated"); sparsified: the sidecar's
        description of sparsified training, or None.
    compute: the layer table's compute object ({"forward_backward": "12.5ms", "batch": 32, "device": ..,
        "method": .., "source": ..}, what sparsim charges under compute.training "model"); None: measured
        while recording (on this host).
    writes_sidecar: whether this process writes recording.json (one process per recording does).
    overwrite: a folder that already holds a recording is an error unless this is true; then its recorded
        files and sidecar are deleted first.
    """

    def __init__(self, folder, model, ranks, batch_size, *, dtype="float32", start=0, max_iterations=None,
                 recorder, sparsified=None, compute=None, writes_sidecar=True, overwrite=False):
        if dtype not in _DTYPES:
            raise ValueError(f"dtype {dtype!r}: expected one of {sorted(_DTYPES)}")
        if ranks < 1 or batch_size < 1 or start < 0 or (max_iterations is not None and max_iterations < 1):
            raise ValueError(f"ranks {ranks}, batch_size {batch_size}, start {start}, max_iterations "
                             f"{max_iterations}: expected ranks >= 1, batch_size >= 1, start >= 0 and "
                             "max_iterations None or >= 1")
        self.folder = folder
        self.model = model
        self.ranks = ranks
        self.batch_size = batch_size
        self.dtype = dtype
        self.start = start
        self.max_iterations = max_iterations
        self.recorder = recorder
        self.sparsified = sparsified
        self.writes_sidecar = writes_sidecar
        self.parameters = [p for _, p in trained_parameters(model)]
        self.n = sum(p.numel() for p in self.parameters)
        self.iterations = 0  # recorded iterations whose files are written
        self.table = layer_table(model)  # without its compute object
        self.compute = compute  # the layer table's compute object, once known (given, or measured)
        self.compute_given = compute is not None
        if writes_sidecar:
            self._prepare_folder(overwrite)

    def _prepare_folder(self, overwrite):
        os.makedirs(self.folder, exist_ok=True)
        old = [name for name in os.listdir(self.folder) if name == SIDECAR or _RECORDED_FILE.fullmatch(name)]
        if old and not overwrite:
            raise FileExistsError(f"{self.folder} already holds a recording ({len(old)} files such as "
                                  f"{sorted(old)[0]}): choose another folder or pass overwrite=True")
        for name in old:
            os.unlink(os.path.join(self.folder, name))

    def records(self, step):
        """Whether training step `step` (counted from 0) is recorded."""
        if step < self.start:
            return False
        return self.max_iterations is None or step - self.start < self.max_iterations

    def write(self, step, rank, flat):
        """Writes rank's flattened gradient (a 1-D tensor of n values) of training step `step`."""
        if flat.shape != (self.n,):
            raise ValueError(f"rank {rank}'s gradient has shape {tuple(flat.shape)}, expected ({self.n},)")
        values = flat.detach().to(device="cpu", dtype=_DTYPES[self.dtype]).numpy()
        if not np.isfinite(values).all():
            bad = int(np.flatnonzero(~np.isfinite(values))[0])
            raise ValueError(f"step {step}, rank {rank}: entry {bad} of the gradient is {values[bad]} in "
                             f"{self.dtype} ({flat[bad].item()} before conversion): sparsim replays finite "
                             "gradients only (record float32, or skip the steps a loss scaler skips)")
        path = os.path.join(self.folder, FILES.format(iteration=step - self.start, rank=rank))
        _replace_atomically(path, lambda out: np.save(out, values))

    def finish_iteration(self, step):
        """Counts training step `step` as recorded (every rank's file written) and rewrites the sidecar."""
        self.iterations = step - self.start + 1
        if self.writes_sidecar:
            self.write_sidecar()

    def sidecar(self):
        """The sidecar's content (a dict)."""
        content = {
            "files": FILES,
            "n": self.n,
            "ranks": self.ranks,
            "iterations": self.iterations,
            "first_step": self.start,
            "batch": self.batch_size,
            "dtype": self.dtype,
            "recorder": self.recorder,
        }
        if self.sparsified is not None:
            content["sparsified"] = self.sparsified
        content["model"] = dict(self.table, compute=self.compute) if self.compute else self.table
        return content

    def write_sidecar(self):
        text = sidecar_text(self.sidecar())
        _replace_atomically(os.path.join(self.folder, SIDECAR), lambda out: out.write(text.encode()))

    def measured_compute(self, seconds, what):
        """Sets the layer table's compute object from measured times of one rank's forward and backward pass
        (`seconds`: one per recorded step; the first, a warm-up, is left out when there are others), unless
        the user gave one. `what` says what was timed."""
        if self.compute_given:
            return
        kept = seconds[1:] if len(seconds) > 1 else seconds
        warm_up = ", the first left out as warm-up" if len(seconds) > 1 else ""
        self.compute = {
            "forward_backward": format_duration(sum(kept) / len(kept)),
            "batch": self.batch_size,
            "device": device_description(self.parameters[0].device),
            "method": f"measured: mean wall-clock time of {what} over {len(kept)} recorded "
                      f"step{'s' if len(kept) > 1 else ''}{warm_up}",
            "source": f"sparsim_record while recording (torch {torch.__version__}, host "
                      f"{platform.node() or 'unknown'})",
        }


def sidecar_text(content):
    """The sidecar as JSON: one line per key, and the layer table as in configs/models/ (a layer per line)."""
    def entries(obj, indent, layers_key=None):
        lines = []
        for key, value in obj.items():
            if key == layers_key:
                rows = ",\n".join(f"{indent}  {json.dumps(layer)}" for layer in value)
                lines.append(f"{indent}{json.dumps(key)}: [\n{rows}\n{indent}]")
            elif isinstance(value, dict) and key == "model":
                lines.append(f"{indent}{json.dumps(key)}: {{\n{entries(value, indent + '  ', 'layers')}\n{indent}}}")
            else:
                lines.append(f"{indent}{json.dumps(key)}: {json.dumps(value)}")
        return ",\n".join(lines)

    return "{\n" + entries(content, "  ") + "\n}\n"


def flatten_gradients(parameters):
    """The gradients of `parameters` concatenated into one 1-D tensor (zeros for a parameter without one)."""
    return torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype,
                                                                                 device=p.device)
                      for p in parameters])
