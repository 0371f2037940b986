"""Simulated data parallelism in one process: P ranks' gradients per training step, recorded.

Each step, every simulated rank computes the gradient of its own batch; the step's update is their mean
(what DistributedDataParallel's allreduce gives every rank), or, with `sparsify`, the mean of each rank's
top-k with error feedback (the update sparsified training applies). The ranks either share one model (the
replicas of synchronous data parallelism stay equal) or each has its own replica (for per-replica state such
as batch-norm running statistics); the caller's optimizer then applies the update left in `.grad`.
"""

import time

import torch

from .layers import trained_parameters
from .recording import Recording, flatten_gradients


class SimulatedDataParallel:
    """Records P simulated ranks' gradients, one training step per call to step().

    model: one nn.Module shared by the ranks, or a list of P replicas with the same parameters' shapes.
    ranks: P; folder: where the recording goes (created; see Recording for the other options).
    batch_size: samples per rank and step; None: the length of the first tensor of the first step's first batch.
    sparsify: None (dense updates), or the density k/n of each rank's top-k with error feedback: rank r sends
        the k largest entries of its residual plus gradient and keeps the rest as its next residual; the
        update is the mean of what the ranks sent. The recorded gradients are the fresh ones, before the
        residual is added (sparsim adds its own).
    """

    def __init__(self, model, ranks, folder, *, batch_size=None, sparsify=None, dtype="float32", start=0,
                 max_iterations=None, compute=None, overwrite=False):
        self.replicas = list(model) if isinstance(model, (list, tuple)) else None
        if self.replicas is not None and len(self.replicas) != ranks:
            raise ValueError(f"{len(self.replicas)} replicas for {ranks} ranks: expected one per rank, or one model")
        self.ranks = ranks
        self.folder = folder
        self.batch_size = batch_size
        self.options = dict(dtype=dtype, start=start, max_iterations=max_iterations, compute=compute,
                            overwrite=overwrite)
        self.first = self.replicas[0] if self.replicas is not None else model
        self.parameters = [[p for _, p in trained_parameters(m)] for m in (self.replicas or [model])]
        shapes = [[p.shape for p in params] for params in self.parameters]
        if any(s != shapes[0] for s in shapes):
            raise ValueError("the replicas' trained parameters differ in number or shape")
        self.n = sum(p.numel() for p in self.parameters[0])
        if sparsify is not None and not 0 < sparsify <= 1:
            raise ValueError(f"sparsify {sparsify}: expected a density in (0, 1], or None")
        self.k = None if sparsify is None else max(1, int(sparsify * self.n))
        self.sparsify = sparsify
        self.residuals = None  # per rank, with sparsify
        self.recording = None  # created at the first step (it needs the batch size)
        self.step_count = 0
        self.seconds = []  # forward + backward of one rank's batch, per recorded step

    def _model(self, rank):
        return self.replicas[rank] if self.replicas is not None else self.first

    def _params(self, rank):
        return self.parameters[rank] if self.replicas is not None else self.parameters[0]

    def step(self, batches, loss_fn):
        """One training step: rank r's gradient is that of loss_fn(model of rank r, batches[r]).

        Records the gradients when the step is in the recorded range, then leaves the update in every
        model's `.grad` for the caller's optimizer(s). Returns the ranks' losses (floats).
        """
        if len(batches) != self.ranks:
            raise ValueError(f"{len(batches)} batches for {self.ranks} ranks: expected one per rank")
        if self.recording is None:
            self.recording = self._open(batches[0])
        recorded = self.recording.records(self.step_count)

        # Each rank's gradient of its batch, timed.
        gradients, losses, elapsed = [], [], 0.0
        for rank, batch in enumerate(batches):
            model = self._model(rank)
            model.zero_grad(set_to_none=True)
            begin = time.perf_counter()
            loss = loss_fn(model, batch)
            loss.backward()
            elapsed += time.perf_counter() - begin
            gradients.append(flatten_gradients(self._params(rank)).detach().clone())
            losses.append(float(loss))

        # The recording: every rank's file, then the sidecar.
        if recorded:
            self.seconds.append(elapsed / self.ranks)
            for rank, gradient in enumerate(gradients):
                self.recording.write(self.step_count, rank, gradient)
            self.recording.measured_compute(self.seconds, "one rank's forward and backward pass (loss_fn and "
                                                          "backward) in SimulatedDataParallel.step")
            self.recording.finish_iteration(self.step_count)
        self.step_count += 1

        # The update every rank applies: the mean of the ranks' gradients, or of their sparsified ones.
        update = torch.stack(gradients).mean(dim=0) if self.k is None else self._sparsified_mean(gradients)
        for rank in range(len(self.parameters)):
            offset = 0
            for p in self._params(rank):
                p.grad = update[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
        return losses

    def _sparsified_mean(self, gradients):
        """The mean over ranks of the top-k of residual + gradient; the rest becomes the residual."""
        if self.residuals is None:
            self.residuals = [torch.zeros_like(g) for g in gradients]
        total = torch.zeros_like(gradients[0])
        for rank, gradient in enumerate(gradients):
            accumulated = self.residuals[rank] + gradient
            chosen = accumulated.abs().topk(self.k, sorted=False).indices
            total[chosen] += accumulated[chosen]
            accumulated[chosen] = 0
            self.residuals[rank] = accumulated
        return total / self.ranks

    def _open(self, first_batch):
        """The Recording, with the batch size given or read from the first batch."""
        batch_size = self.batch_size
        if batch_size is None:
            tensor = first_batch[0] if isinstance(first_batch, (tuple, list)) else first_batch
            batch_size = len(tensor)
        sparsified = None if self.k is None else {"density": self.sparsify, "k": self.k, "error_feedback": True}
        return Recording(self.folder, self.first, self.ranks, batch_size, recorder="simulated",
                         sparsified=sparsified, **self.options)
