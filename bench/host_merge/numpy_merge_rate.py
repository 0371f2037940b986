"""Effective rate of a host-side sparse merge written with NumPy, in sparsim's reduction traffic units.

A gTopk tree round on the host: two sets of k (index, value) pairs are summed on the union of their indices
and the k largest magnitudes are kept, written with NumPy as a Python implementation would (union1d,
searchsorted, argpartition; float64 values, as the Ok-Topk reference code sends). sparsim's compute.reduction
counts such a round as 8 bytes per pair read and written: 2k in, m merged out, m read again, k out. This
script times the round (median of 5) for k of VGG-16, LSTM and BERT-base sizes and prints
traffic / time: a `compute.reduction_bandwidth` that makes sparsim charge what NumPy takes on this machine.

Usage: $(command -v -p python3) bench/host_merge/numpy_merge_rate.py
"""
import time

import numpy as np

REPEATS = 5
# k of the study's workloads (docs/study-oktopk.md): VGG-16 at 2%, LSTM at 2%, BERT-base at 1%, and n.
WORKLOADS = [("VGG-16", 14_728_266, 294_565), ("LSTM", 27_569_568, 551_391), ("BERT-base", 133_547_324, 1_335_473)]


def merge_round(a_idx, a_val, b_idx, b_val, k):
    union = np.union1d(a_idx, b_idx)
    summed = np.zeros(union.size)
    summed[np.searchsorted(union, a_idx)] += a_val
    summed[np.searchsorted(union, b_idx)] += b_val
    keep = np.argpartition(np.abs(summed), -k)[-k:]
    return union[keep], summed[keep]


rng = np.random.default_rng(1)
for name, n, k in WORKLOADS:
    seconds = []
    for _ in range(REPEATS):
        a_idx = np.sort(rng.choice(n, k, replace=False))
        b_idx = np.sort(rng.choice(n, k, replace=False))
        a_val, b_val = rng.standard_normal(k), rng.standard_normal(k)
        start = time.perf_counter()
        merge_round(a_idx, a_val, b_idx, b_val, k)
        seconds.append(time.perf_counter() - start)
        merged = np.union1d(a_idx, b_idx).size
    median = sorted(seconds)[REPEATS // 2]
    traffic = 8 * (2 * k + merged + merged + k)
    print(f"{name}: k = {k}, merged {merged}, median {median * 1e3:.1f} ms per round, "
          f"{traffic / median / 1e9:.3f} GB/s in sparsim's reduction traffic")
