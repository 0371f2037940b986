"""sparsim_record: record the gradients of a PyTorch data-parallel training run for sparsim's replay.

    from sparsim_record import record_ddp, SimulatedDataParallel

record_ddp(ddp_model, "recording", batch_size=32) records a DistributedDataParallel run (a communication
hook); SimulatedDataParallel(model, ranks, "recording") simulates P ranks in one process. Both write
it{iteration}_rank{rank}.npy files (each rank's gradient flattened in model.parameters() order) and a
recording.json sidecar with the layer table; sparsim replays them with
{"source": "replay", "files": "recording/it{iteration}_rank{rank}.npy"}. See docs/gradients.md.
"""

from .ddp import record_ddp
from .layers import layer_table
from .recording import FILES, SIDECAR, Recording
from .simulated import SimulatedDataParallel


__all__ = ["FILES", "SIDECAR", "Recording", "SimulatedDataParallel", "layer_table", "record_ddp"]
