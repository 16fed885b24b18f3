"""Split-conformal quantiles of log residuals, weighted or not: the band of a user's own profile
(``planner.uncertainty.profile_bands``) and of the committed table (``python -m lab.bands``)."""

from __future__ import annotations

import numpy as np

from planner.uncertainty.bands import LogBand


def weighted_quantiles(
    residuals: np.ndarray, weights: np.ndarray, tails: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Split-conformal quantiles of ``residuals`` at every tail probability t of ``tails``: the
    residual where the cumulative weight first reaches k/n, k = max(floor((n+1)·t), 1) below and
    min(ceil((n+1)·(1-t)), n) above; with equal weights the k-th smallest."""
    order = np.argsort(residuals, kind="stable")
    r = residuals[order]
    c = np.cumsum(weights[order])
    c = c / c[-1]
    n, t = r.size, np.asarray(tails, dtype=float)
    p_lo = np.maximum(np.floor((n + 1) * t), 1.0) / n
    p_hi = np.minimum(np.ceil((n + 1) * (1.0 - t)), n) / n
    at = [np.minimum(np.searchsorted(c, p - 1e-9, side="left"), n - 1) for p in (p_lo, p_hi)]
    return r[at[0]], r[at[1]]


def conformal_band(
    residuals: np.ndarray, level: float, weights: np.ndarray | None = None
) -> LogBand:
    """Split-conformal equal-tailed band of the finite log ``residuals`` at ``level``
    (``weighted_quantiles`` at tail (1 - level) / 2; equal weights unless given)."""
    ok = np.isfinite(residuals)
    w = np.ones(int(ok.sum())) if weights is None else np.asarray(weights, dtype=float)[ok]
    lo, hi = weighted_quantiles(residuals[ok], w, np.array([(1.0 - level) / 2.0]))
    return LogBand(float(lo[0]), float(hi[0]))
