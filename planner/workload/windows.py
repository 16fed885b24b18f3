"""Split a timed trace into windows and summarise each: rate, burstiness and lengths.

Besides the window's mean rate and the CV of its inter-arrival gaps (``arrival_cv``, what a
single-rate queueing formula would take), each window gets the two numbers the sizing uses:

* ``design_rate``: the rate of the ``SUB_WINDOW_S`` sub-windows weighted by their requests, at the
  SLO percentile: the rate that all but that share of the window's requests arrive under. A burst
  of 10 minutes inside a 15-minute window is a change of rate, and this is the rate its requests
  see.
* ``local_cv``: the CV of the gaps once each is scaled by its sub-window's rate, the burstiness at
  a given rate (1 for Poisson arrivals, whatever the rate does between sub-windows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.workload.spec import SAMPLE_COUNT, LengthSpec
from planner.workload.traces import Trace

SUB_WINDOW_S = 60.0
"""Sub-window over which the rate is taken as constant, seconds (one minute: bursts in production
traces last minutes, BurstGPT Fig. 5; a minute holds enough requests at 1 req/s for a rate)."""
MIN_GAPS_FOR_CV = 8
"""Fewer gaps than this in a window: its CVs are reported as null and the sizing takes 1
(Poisson)."""


@dataclass(frozen=True)
class Window:
    """One window of a trace."""

    index: int
    start_s: float
    duration_s: float
    requests: int
    rate: float
    """Mean arrival rate, requests/s."""
    arrival_cv: float
    """CV of inter-arrival gaps in the window (nan when too few)."""
    local_cv: float
    """CV of the gaps scaled by their sub-window rate (nan when too few)."""
    design_rate: float
    """Request-weighted sub-window rate at the SLO percentile, requests/s."""
    isl_mean: float
    isl_cv: float
    osl_mean: float
    osl_cv: float
    isl: np.ndarray
    osl: np.ndarray

    def lengths(self) -> tuple[LengthSpec, LengthSpec]:
        """The window's ISL and OSL as sampled distributions (at most SAMPLE_COUNT lengths kept)."""
        step = max(1, math.ceil(self.isl.size / SAMPLE_COUNT))
        i, o = self.isl[::step], self.osl[::step]
        return (
            LengthSpec(mean=float(np.mean(i)), samples=tuple(int(v) for v in i)),
            LengthSpec(mean=float(np.mean(o)), samples=tuple(int(v) for v in o)),
        )


def _cv(x: np.ndarray) -> float:
    if x.size < MIN_GAPS_FOR_CV:
        return math.nan
    mean = float(np.mean(x))
    return float(np.std(x) / mean) if mean > 0 else math.nan


def _weighted_quantile(rates: np.ndarray, counts: np.ndarray, q: float) -> float:
    """Smallest sub-window rate under which a share ``q`` of the requests arrive."""
    order = np.argsort(rates)
    cum = np.cumsum(counts[order])
    k = int(np.searchsorted(cum, q * cum[-1]))
    return float(rates[order][min(k, order.size - 1)])


def _window(trace: Trace, k: int, start: float, dur: float, lo: int, hi: int, q: float) -> Window:
    t = trace.arrival_s[lo:hi]
    isl, osl = trace.isl[lo:hi], trace.osl[lo:hi]
    n = hi - lo
    nan = math.nan
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Window(k, start, dur, 0, 0.0, nan, nan, 0.0, nan, nan, nan, nan, empty, empty)
    sub = np.minimum(
        ((t - start) // SUB_WINDOW_S).astype(int), max(math.ceil(dur / SUB_WINDOW_S) - 1, 0)
    )
    counts = np.bincount(sub)
    widths = np.minimum(SUB_WINDOW_S, dur - np.arange(counts.size) * SUB_WINDOW_S)
    sub_rate = counts / np.maximum(widths, 1e-9)
    gaps = np.diff(t)
    local = gaps * sub_rate[sub[1:]]
    return Window(
        k,
        start,
        dur,
        n,
        n / dur,
        _cv(gaps),
        _cv(local),
        _weighted_quantile(sub_rate, counts, q),
        float(np.mean(isl)),
        float(np.std(isl) / np.mean(isl)),
        float(np.mean(osl)),
        float(np.std(osl) / np.mean(osl)),
        isl,
        osl,
    )


def split(trace: Trace, window_s: float, quantile: float) -> list[Window]:
    """Windows of ``window_s`` from the first arrival (floored to a whole window) to the last; the
    last window ends at the last arrival (at least one sub-window long)."""
    if not trace.timed or len(trace) == 0:
        raise ValueError("split needs a timed, non-empty trace")
    t = trace.arrival_s
    origin = math.floor(t[0] / window_s) * window_s
    count = max(1, math.ceil((t[-1] - origin) / window_s + 1e-12))
    if t[-1] >= origin + count * window_s:
        count += 1
    starts = origin + window_s * np.arange(count)
    bounds = np.searchsorted(t, starts, side="left").tolist() + [len(trace)]
    end = max(float(t[-1]), starts[-1] + SUB_WINDOW_S)
    out = []
    for k in range(count):
        dur = window_s if k < count - 1 else min(window_s, end - starts[k])
        out.append(
            _window(trace, k, float(starts[k]), float(dur), bounds[k], bounds[k + 1], quantile)
        )
    return out
