"""Recording from DistributedDataParallel: a communication hook that writes each rank's local gradient.

DDP hands its hook the gradients bucket by bucket; buckets hold parameters in roughly reverse order, and DDP
rebuilds them after the first iteration in the order gradients became ready. The hook therefore copies each
bucket's gradients to their parameters' offsets in model.parameters() order (found through
bucket.parameters()) and writes the rank's file when the iteration's last bucket arrives. It then averages
the bucket with an allreduce, as DDP does without a hook, so training is unchanged.

The time from the forward call to the last bucket (the forward and backward pass, overlapped with the
allreduces of the earlier buckets) is measured for the sidecar's compute object.
"""

import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from .recording import Recording


class DdpRecorder:
    """The hook's state: the rank's flat gradient of the current step and the recording."""

    def __init__(self, ddp_model, folder, batch_size, process_group, **options):
        self.group = process_group if process_group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        model = ddp_model.module
        # Rank 0 prepares the folder and writes the sidecar; the others wait until the folder is ready.
        self.recording = Recording(folder, model, dist.get_world_size(self.group), batch_size, recorder="ddp_hook",
                                   writes_sidecar=self.rank == 0, **options)
        dist.barrier(self.group)
        # Where each parameter's gradient goes in the flat vector (parameters are told apart by their storage).
        self.offsets = {}
        offset = 0
        for p in self.recording.parameters:
            self.offsets[p.data_ptr()] = (offset, p.numel())
            offset += p.numel()
        self.flat = None
        self.filled = 0  # entries of `flat` written in this step
        self.step = 0
        self.forward_start = None
        self.seconds = []
        ddp_model.register_forward_pre_hook(self._forward_started)

    def _forward_started(self, module, inputs):
        self.forward_start = time.perf_counter()

    def copy_bucket(self, bucket):
        """Copies the bucket's gradients to their offsets in the step's flat gradient."""
        if self.flat is None:
            buffer = bucket.buffer()
            self.flat = torch.zeros(self.recording.n, dtype=buffer.dtype, device=buffer.device)
        for p, gradient in zip(bucket.parameters(), bucket.gradients()):
            place = self.offsets.get(p.data_ptr())
            if place is None:
                raise RuntimeError("sparsim_record: DDP's bucket holds a parameter that is not among the model's "
                                   "trained parameters (record_ddp needs the DDP-wrapped model)")
            offset, size = place
            self.flat[offset:offset + size].copy_(gradient.reshape(-1))
            self.filled += size

    def finish_step(self, device):
        """At the step's last bucket: times the pass, writes the rank's file (rank 0: the sidecar too)."""
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if self.forward_start is not None:
            self.seconds.append(time.perf_counter() - self.forward_start)
        if self.filled != self.recording.n:
            raise RuntimeError(f"sparsim_record: step {self.step}'s buckets held {self.filled} gradient entries, the "
                               f"model's trained parameters {self.recording.n}")
        self.recording.write(self.step, self.rank, self.flat)
        if self.seconds:
            self.recording.measured_compute(self.seconds, "one rank's forward and backward pass (from the DDP "
                                                          "module's forward call to its last gradient bucket)")
        self.recording.finish_iteration(self.step)
        self.flat = None
        self.filled = 0


def _record_and_allreduce(state, bucket):
    """The communication hook: record the bucket if this step is recorded, then DDP's averaging allreduce."""
    recorded = state.recording.records(state.step)
    if recorded:
        state.copy_bucket(bucket)  # before the allreduce, which divides the buffer in place
    if bucket.is_last():
        if recorded:
            state.finish_step(bucket.buffer().device)
        state.step += 1
    return default_hooks.allreduce_hook(state.group, bucket)


def record_ddp(ddp_model, folder, batch_size, *, process_group=None, dtype="float32", start=0, max_iterations=None,
               compute=None, overwrite=False):
    """Registers the recording hook on `ddp_model` (a DistributedDataParallel); call it on every rank.

    folder: the recording's folder (every rank writes its own files there, rank 0 the sidecar); batch_size:
    samples per rank and step. The other options are Recording's. Returns the hook's state (its
    `recording.iterations` counts the steps recorded so far).

    With torch 1.13, delete the DDP model before dist.destroy_process_group(): destroying the gloo process group
    while a Python communication hook is registered can deadlock (torch's own hooks too).
    """
    state = DdpRecorder(ddp_model, folder, batch_size, process_group, dtype=dtype, start=start,
                        max_iterations=max_iterations, compute=compute, overwrite=overwrite)
    ddp_model.register_comm_hook(state, _record_and_allreduce)
    return state
