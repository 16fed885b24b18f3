"""Synthetic time-stamped traces: a daily cycle and bursts as a time-varying rate (seedable).

The rate is lambda(t) = base(t) · burst(t): base(t) runs between ``peak_rate / daily_ratio`` (at
``trough_hour``) and ``peak_rate`` twelve hours later along a raised cosine; burst(t) is
``burst_factor`` inside each burst and 1 elsewhere. Bursts last ``burst_minutes`` and start at
seeded random times that do not overlap. Arrivals come from time rescaling (Cinlar's theorem: a
unit-rate renewal process mapped through the inverse of Lambda(t) = integral of lambda has rate
lambda(t)): gaps of Gamma(1/cv^2, cv^2) in the rescaled time give Poisson arrivals for cv = 1 and
burstier ones (the BurstGPT study fits Gamma gaps, CV above 1, to its API traffic) for cv > 1.
Prompt and answer lengths are lognormal with the given CV around a mean that may follow the day
(``length_daily_swing``; production lengths shift with the hour, BurstGPT sec. 3). The bursts are a
change of rate over minutes, not the gap distribution the analytic sizing assumes for one rate.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from planner.workload.traces import Trace

_FROZEN = ConfigDict(frozen=True, extra="forbid")
SECONDS_PER_DAY = 86400.0
RATE_GRID_S = 1.0
"""Resolution of the integrated rate Lambda(t), seconds."""


class TraceSpec(BaseModel):
    """What a synthetic trace looks like."""

    model_config = _FROZEN
    hours: float = Field(default=24.0, gt=0, le=24 * 31, description="Length of the trace, hours.")
    peak_rate: float = Field(
        default=4.0, gt=0, le=1e5, description="Daily-cycle peak rate outside bursts, requests/s."
    )
    daily_ratio: float = Field(
        default=4.0, ge=1, le=1000, description="Daily peak rate / trough rate."
    )
    trough_hour: float = Field(
        default=4.0, ge=0, lt=24, description="Hour of the day of the trough."
    )
    bursts_per_day: float = Field(default=6.0, ge=0, le=100, description="Bursts per 24 hours.")
    burst_minutes: float = Field(
        default=10.0, gt=0, le=240, description="Length of one burst, minutes."
    )
    burst_factor: float = Field(
        default=3.0, ge=1, le=100, description="Rate multiplier inside a burst."
    )
    arrival_cv: float = Field(
        default=1.0, gt=0, le=10, description="CV of gaps at a constant rate (1 = Poisson)."
    )
    isl_mean: float = Field(default=1024.0, ge=1, le=1e6, description="Mean prompt length, tokens.")
    isl_cv: float = Field(default=0.5, ge=0, le=4, description="CV of prompt lengths (lognormal).")
    osl_mean: float = Field(default=256.0, ge=1, le=1e6, description="Mean answer length, tokens.")
    osl_cv: float = Field(default=0.5, ge=0, le=4, description="CV of answer lengths (lognormal).")
    length_daily_swing: float = Field(
        default=0.0,
        ge=0,
        le=0.9,
        description="Mean lengths move by this share over the day: (1 - s) x at the trough, "
        "(1 + s) x at the peak.",
    )
    seed: int = Field(default=0, ge=0, description="Random seed (same seed, same trace).")


class Generated(BaseModel):
    """A synthetic trace's bursts (the trace itself is returned beside it)."""

    model_config = _FROZEN
    bursts: tuple[tuple[float, float], ...] = Field(description="(start_s, end_s) of every burst.")


def _daily(spec: TraceSpec, t: np.ndarray) -> np.ndarray:
    """The daily cycle at times ``t`` (s): -1 at the trough hour, +1 twelve hours later."""
    return -np.cos(2.0 * np.pi * (t / SECONDS_PER_DAY - spec.trough_hour / 24.0))


def base_rate(spec: TraceSpec, t: np.ndarray) -> np.ndarray:
    """Daily-cycle rate at times ``t`` (s), requests/s, without bursts."""
    trough = spec.peak_rate / spec.daily_ratio
    return trough + (spec.peak_rate - trough) * (1.0 + _daily(spec, t)) / 2.0


def burst_windows(spec: TraceSpec, rng: np.random.Generator) -> tuple[tuple[float, float], ...]:
    """Non-overlapping bursts at random starts (at least one burst length apart)."""
    total = spec.hours * 3600.0
    n = int(round(spec.bursts_per_day * spec.hours / 24.0))
    length = spec.burst_minutes * 60.0
    slots = int(total // (2 * length))
    if n == 0 or slots == 0:
        return ()
    picks = np.sort(rng.choice(slots, size=min(n, slots), replace=False))
    return tuple((float(s * 2 * length), float(s * 2 * length + length)) for s in picks)


def rate(spec: TraceSpec, t: np.ndarray, bursts: tuple[tuple[float, float], ...]) -> np.ndarray:
    """lambda(t), requests/s, bursts included."""
    lam = base_rate(spec, t)
    for a, b in bursts:
        lam = np.where((t >= a) & (t < b), lam * spec.burst_factor, lam)
    return lam


def _lengths(rng: np.random.Generator, n: int, mean: np.ndarray, cv: float) -> np.ndarray:
    if cv == 0:
        return np.maximum(np.round(mean), 1).astype(np.int64)
    s2 = np.log1p(cv * cv)
    x = rng.lognormal(np.log(mean) - s2 / 2.0, np.sqrt(s2), n)
    return np.maximum(np.round(x), 1).astype(np.int64)


def generate(spec: TraceSpec) -> tuple[Trace, Generated]:
    """The trace and its bursts; deterministic in ``spec`` (seed included)."""
    rng = np.random.default_rng(spec.seed)
    total = spec.hours * 3600.0
    bursts = burst_windows(spec, rng)
    grid = np.arange(0.0, total + RATE_GRID_S, RATE_GRID_S)
    lam = rate(spec, grid[:-1] + RATE_GRID_S / 2.0, bursts)
    cum = np.concatenate([[0.0], np.cumsum(lam * RATE_GRID_S)])
    shape = 1.0 / spec.arrival_cv**2
    expect = int(cum[-1] * 1.05 + 10.0 * np.sqrt(cum[-1]) + 10)
    u = np.cumsum(rng.gamma(shape, 1.0 / shape, expect))
    while u[-1] < cum[-1]:
        u = np.concatenate([u, u[-1] + np.cumsum(rng.gamma(shape, 1.0 / shape, expect // 10 + 10))])
    u = u[u < cum[-1]]
    t = np.interp(u, cum, grid)
    n = t.shape[0]
    swing = 1.0 + spec.length_daily_swing * _daily(spec, t)
    isl = _lengths(rng, n, spec.isl_mean * swing, spec.isl_cv)
    osl = _lengths(rng, n, spec.osl_mean * swing, spec.osl_cv)
    desc = f"synthetic seed {spec.seed}"
    return Trace(t, isl, osl, source=desc, layout="synthetic"), Generated(bursts=bursts)
