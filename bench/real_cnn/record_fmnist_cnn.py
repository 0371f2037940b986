"""Records a small ResNet's gradients on Fashion-MNIST, P simulated data-parallel ranks (docs/gradients.md,
"A real CNN as the oracle").

The network (`FashionResNet`, 480,450 trained parameters): a 3x3 stem convolution (1 -> 40 channels) with batch
norm, three residual stages of one basic block each (two 3x3 convolutions with batch norm; 40, 80 and 160
channels, the last two with stride 2 and a 1x1 projection shortcut), global average pooling and one linear
layer to the 10 classes. Trained from a fixed seed with SGD (momentum 0.9, learning rate 0.05), `--batch`
images per rank and step; each step every rank takes its own slice of one shuffled global batch, and the step
applies the ranks' mean gradient (sparsim_record.SimulatedDataParallel, one shared model: dense synchronous
data parallelism). Every step from the first is recorded, in float16, into FOLDER/P{ranks}/ with the
recorder's sidecar; --table writes its layer table (with the forward and backward time measured while
recording P = ranks[0]) as configs/models/resnet_fmnist.json.

    PYTHONPATH=python /usr/bin/python3 bench/real_cnn/record_fmnist_cnn.py /work/scratch/fmnist_cnn \\
        [--ranks 8 16] [--iterations 200] [--batch 32] [--data /usr/share/datasets/fashion-mnist] \\
        [--table configs/models/resnet_fmnist.json]

Disk: n * P * iterations * 2 bytes (P = 8 and 16, 200 iterations: 1.5 and 3.1 GB; 26 minutes on one core
of this project's 2-core machine, shared with other work while it ran). The images are read from
Debian's IDX files (dataset-fashion-mnist) with gzip and NumPy; nothing is downloaded.
"""

import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sparsim_record import SimulatedDataParallel

# Pixel mean and standard deviation of the Fashion-MNIST training images (on a 0-1 scale).
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530


def read_idx(path):
    """An IDX file (gzip) as a NumPy array: magic (2 zero bytes, type 0x08 = uint8, rank), sizes, data."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    rank = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(shape)


def load_split(folder, split):
    """Normalised images (N, 1, 28, 28) and labels of the "train" or "t10k" split."""
    images = read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - PIXEL_MEAN) / PIXEL_STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut (a 1x1 projection when the shape changes)."""

    def __init__(self, channels_in, channels_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class FashionResNet(nn.Module):
    """Stem, three one-block stages (40, 80, 160 channels; 28, 14, 7 pixels), pooling, one linear layer."""

    def __init__(self, widths=(40, 80, 160), classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, widths[0], 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(widths[0])
        self.stage1 = BasicBlock(widths[0], widths[0], 1)
        self.stage2 = BasicBlock(widths[0], widths[1], 2)
        self.stage3 = BasicBlock(widths[1], widths[2], 2)
        self.fc = nn.Linear(widths[2], classes)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.stage3(self.stage2(self.stage1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def accuracy(model, images, labels, batch=1000):
    """Test accuracy in evaluation mode (batch norm's running statistics)."""
    model.eval()
    correct = 0
    with torch.no_grad():
        for begin in range(0, len(images), batch):
            correct += int((model(images[begin:begin + batch]).argmax(1) == labels[begin:begin + batch]).sum())
    model.train()
    return correct / len(images)


def record(ranks, args, train, test):
    """Trains from the fixed seed with `ranks` simulated ranks and records every step; returns a summary."""
    torch.manual_seed(args.seed)
    model = FashionResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    folder = os.path.join(args.folder, f"P{ranks}")
    recorder = SimulatedDataParallel(model, ranks, folder, batch_size=args.batch, dtype="float16",
                                     max_iterations=args.iterations, overwrite=True)
    images, labels = train
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(args.seed))
    global_batch = ranks * args.batch
    begin_time = time.perf_counter()
    losses = []
    for step in range(args.iterations):
        # The step's global batch (the next slice of one shuffled order, wrapping at the epoch's end), one
        # slice per rank.
        positions = (torch.arange(global_batch) + step * global_batch) % len(images)
        slices = [order[positions[r * args.batch:(r + 1) * args.batch]] for r in range(ranks)]
        batches = [(images[chosen], labels[chosen]) for chosen in slices]
        # Every rank's gradient recorded; the update (their mean) applied.
        optimizer.zero_grad(set_to_none=True)
        step_losses = recorder.step(batches, lambda m, b: F.cross_entropy(m(b[0]), b[1]))
        optimizer.step()
        losses.append(float(np.mean(step_losses)))
        if step % 20 == 0 or step == args.iterations - 1:
            print(f"P = {ranks}: step {step}, loss {losses[-1]:.3f}, {time.perf_counter() - begin_time:.0f} s",
                  flush=True)
    seconds = time.perf_counter() - begin_time
    summary = {"ranks": ranks, "iterations": args.iterations, "batch": args.batch, "n": recorder.n,
               "seconds": round(seconds, 1), "first_loss": losses[0], "last_loss": losses[-1],
               "test_accuracy": accuracy(model, *test)}
    print(json.dumps(summary), flush=True)
    return summary


def write_table(sidecar_path, path):
    """The recording's layer table as a configs/models/ file, named resnet_fmnist, one layer per line."""
    with open(sidecar_path) as f:
        table = json.load(f)["model"]
    table["name"] = "resnet_fmnist"
    table["note"] = ("FashionResNet of bench/real_cnn/record_fmnist_cnn.py (Fashion-MNIST, 1 x 28 x 28 images): a 3x3 "
                     "stem conv (40 channels), three one-block residual stages (40, 80, 160 channels), global "
                     "average pooling, Linear(160, 10). " + table["note"] + " compute: measured on the CPU that "
                     "recorded, one thread, not a GPU figure.")
    head = {key: value for key, value in table.items() if key not in ("layers", "compute")}
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    lines.append(f'  "compute": {json.dumps(table["compute"])},')
    lines.append('  "layers": [\n' + ",\n".join(f"    {json.dumps(layer)}" for layer in table["layers"]) + "\n  ]")
    with open(path, "w") as out:
        out.write("{\n" + "\n".join(lines) + "\n}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="where the recordings go: FOLDER/P8, FOLDER/P16 (not in the repository)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32, help="images per rank and step")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--table", help="write the layer table here (configs/models/resnet_fmnist.json)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    train, test = load_split(args.data, "train"), load_split(args.data, "t10k")
    summaries = [record(ranks, args, train, test) for ranks in args.ranks]
    with open(os.path.join(args.folder, "summary.json"), "w") as out:
        json.dump(summaries, out, indent=1)
    if args.table:
        write_table(os.path.join(args.folder, f"P{args.ranks[0]}", "recording.json"), args.table)


if __name__ == "__main__":
    main()
