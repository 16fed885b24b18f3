"""Timing of one estimate (best of 5 batches of 20) and of a 10,000-candidate vectorized evaluation
(``make bench``)."""

from __future__ import annotations

import time

import numpy as np

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, evaluate_batch
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.workload.spec import fixed


def bench() -> dict[str, float]:
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    wl = fixed(2000, 500, concurrency=64)
    w = WorkerConfig(parallel=Parallelism(tp=4), weight_quant="fp8")
    estimate(m, gpu, wl, agg=w)
    n, batches = 20, 5
    one = float("inf")
    for _ in range(batches):  # best of 5 batches: a shared machine's other jobs only add time
        t0 = time.perf_counter()
        for _ in range(n):
            estimate(m, gpu, wl, agg=w)
        one = min(one, (time.perf_counter() - t0) / n)
    rng = np.random.default_rng(0)
    k = 10_000
    c = CandidateArrays.from_lists(
        tp=rng.choice([1, 2, 4, 8], k),
        max_num_seqs=rng.choice([64, 256, 1024], k),
        max_num_batched_tokens=rng.choice([2048, 8192], k),
        weight_quant=rng.choice([0, 1], k),
        kv_dtype=rng.choice([0, 1], k),
        concurrency=rng.choice([1, 16, 64, 256], k),
    )
    t0 = time.perf_counter()
    evaluate_batch(m, gpu, c, wl)
    return {"estimate_one_ms": one * 1e3, "evaluate_10k_configs_s": time.perf_counter() - t0}


if __name__ == "__main__":
    print(bench())
