"""Timers: ``triton.testing.do_bench`` (CUDA events, L2 flushed, median) on GPUs, a low quantile of
``time.perf_counter`` repeats on CPUs. Both return seconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

Fn = Callable[[], object]


@dataclass(frozen=True)
class CpuTimer:
    """``quantile`` of the wall times of ``fn`` after warm-up; repeats until ``target_s`` is spent.

    Default p25, not the median: on a shared CPU (CI runs two test workers on two cores) other
    processes only ever add time to a sample, so a low quantile tracks the undisturbed kernel time
    while the median drifts with the load (measured: 1-thread 64x1024x1024 fp32 GEMM at load 6,
    min 1.7 ms, p25 2.3 ms, median 6.3 ms).
    """

    warmup: int = 2
    min_repeats: int = 8
    max_repeats: int = 60
    target_s: float = 0.05
    """Wall time to spend measuring one shape, seconds."""
    quantile: float = 0.25

    def __call__(self, fn: Fn) -> float:
        for _ in range(self.warmup):
            fn()
        samples: list[float] = []
        spent = 0.0
        while len(samples) < self.max_repeats and (
            len(samples) < self.min_repeats or spent < self.target_s
        ):
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            samples.append(dt)
            spent += dt
        samples.sort()
        return samples[int(self.quantile * (len(samples) - 1))]


@dataclass(frozen=True)
class CudaTimer:
    """``triton.testing.do_bench``: CUDA events around each call, L2 flushed between calls,
    median of the repeats. ``warmup_ms`` / ``rep_ms`` are the time budgets do_bench spends."""

    warmup_ms: float = 5.0
    rep_ms: float = 20.0

    def __call__(self, fn: Fn) -> float:
        from triton.testing import do_bench

        ms = do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median")
        return float(ms) * 1e-3


def cuda_event_median_s(fn: Fn, iters: int, warmup: int = 5) -> float:
    """Median of per-call CUDA-event times, seconds; calls run back to back (no L2 flush).

    Used for collectives, where every rank must run the same number of calls (do_bench sizes
    its loop per process from a first estimate, which would desynchronise the ranks).
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends, strict=True):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e-3


def wall_median_s(fn: Fn, iters: int, warmup: int = 3, sync: Fn | None = None) -> float:
    """Median of per-call wall times, seconds, with an optional ``sync`` after each call."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)
