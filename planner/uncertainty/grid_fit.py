"""Fitting a band table of quantile grids to held-out log residuals (the committed table,
``python -m lab.bands``, and each fold of ``planner validate e2e --holdout gpu``).

Rows carry the band keys (``KEYS``: engine, mode, load, tier), ``gpu_name``, ``model_name`` and
their log residuals ``res_ttft`` / ``res_tpot`` = ln(measured / predicted), from predictions whose
constants never saw the row's GPU. Every group of ``LEVELS`` with at least ``min_rows`` rows gets
the quantiles of its residuals at each probability of ``GRID_PROBS`` (split-conformal order
statistics, ``conformal.weighted_quantiles``; each row weighted 1/sqrt(its campaign's rows in the
group) where rows record a campaign: rows of one campaign share a protocol and err together), shrunk
toward its parent group's grid with ``shrink_rows`` rows of prior weight. A band's edges (lo, hi)
are its grid's (1 -/+ level) / 2 quantiles. A deployment whose model has no rows takes the widest
grid of its tier (``widest_by_tier``). The residuals are GPU-held-out, so a GPU without rows of its
own takes the groups as a measured one does (``BandTable.gpu_held_out``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from planner.replay_e2e.conformal import weighted_quantiles
from planner.uncertainty.bands import KEYS, LEVELS, BandTable, GroupKey, LogBand

T = TypeVar("T")

GRID_PROBS: tuple[float, ...] = (*(round(0.05 * i, 2) for i in range(1, 20)), 0.99)
"""Probabilities of the stored quantile grid: 0.05, 0.10, ..., 0.95 and 0.99."""
METRICS = ("ttft", "tpot")
MIN_ROWS = 30
"""Fewest rows of a group with its own grid (else its parent's applies)."""
SHRINK_ROWS = 30.0
"""Prior weight (rows) of a group's parent grid in its own."""


@dataclass(frozen=True)
class GridFit:
    """One group's rows and campaigns and its quantile grid of each metric (``GRID_PROBS``)."""

    n: int
    campaigns: int
    q: dict[str, np.ndarray]


def grid_quantiles(res: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Quantiles of finite ``res`` at every ``GRID_PROBS`` entry: below 0.5 the split-conformal
    lower order statistic at tail p, from 0.5 up the upper one at tail 1 - p (each side a little
    outward of the plain quantile: the rows scored are not those fitted), made non-decreasing."""
    ok = np.isfinite(res)
    p = np.asarray(GRID_PROBS)
    lo, _ = weighted_quantiles(res[ok], weights[ok], np.minimum(p, 0.5))
    _, hi = weighted_quantiles(res[ok], weights[ok], np.maximum(1.0 - p, 0.0))
    return np.maximum.accumulate(np.where(p < 0.5, lo, hi))


def _weights(sub: pd.DataFrame) -> np.ndarray:
    if "campaign" not in sub:
        return np.ones(len(sub))
    size = sub.groupby("campaign")["campaign"].transform("size").to_numpy(float)
    return 1.0 / np.sqrt(size)


def _parent(key: GroupKey, fitted: dict[GroupKey, GridFit]) -> GridFit | None:
    names, values = {n for n, _ in key}, dict(key)
    for level in LEVELS:
        if len(level) < len(key) and set(level) <= names:
            g = fitted.get(tuple((n, values[n]) for n in level))
            if g is not None:
                return g
    return None


def fit_grids(rows: pd.DataFrame, min_rows: int = MIN_ROWS) -> dict[GroupKey, GridFit]:
    """Every ``LEVELS`` group of ``rows`` with at least ``min_rows`` rows (and the pool), from the
    pool down, each grid shrunk toward its parent's."""
    fitted: dict[GroupKey, GridFit] = {}
    for names in reversed(LEVELS):
        parts = rows.groupby(list(names), sort=True) if names else [((), rows)]
        for vals, sub in parts:
            if len(sub) < min_rows and names:
                continue
            vals = vals if isinstance(vals, tuple) else (vals,)
            key = tuple((n, str(v)) for n, v in zip(names, vals, strict=True))
            parent = _parent(key, fitted)
            share = len(sub) / (len(sub) + SHRINK_ROWS) if parent is not None else 1.0
            w = _weights(sub)
            q = {}
            for m in METRICS:
                own = grid_quantiles(sub[f"res_{m}"].to_numpy(float), w)
                q[m] = own if parent is None else share * own + (1.0 - share) * parent.q[m]
            camps = int(sub["campaign"].nunique()) if "campaign" in sub else 0
            fitted[key] = GridFit(len(sub), camps, q)
    return fitted


def _widest(fits: list[GridFit]) -> GridFit:
    """Per metric, the lowest quantile below 0.5 and the highest from 0.5 up over ``fits``."""
    p = np.asarray(GRID_PROBS)
    q = {
        m: np.where(
            p < 0.5, np.min([g.q[m] for g in fits], axis=0), np.max([g.q[m] for g in fits], axis=0)
        )
        for m in METRICS
    }
    return GridFit(sum(g.n for g in fits), 0, q)


def widest_table(groups: Mapping[GroupKey, T], widest: Callable[[list[T]], T]) -> dict[str, T]:
    """The entries of a GPU or model without rows (``bands.widest_names``): per engine/mode/tier,
    mode/tier and tier, ``widest`` of the finest groups in it; ``*``: of all groups."""
    finest = [dict(k) for k in groups if len(k) == len(KEYS)]
    out = {"*": widest(list(groups.values()))}
    for names in (("engine", "mode", "tier"), ("mode", "tier"), ("tier",)):
        for key in finest:
            name = "/".join(key[n] for n in names)
            if name not in out:
                out[name] = widest(
                    [
                        g
                        for k, g in groups.items()
                        if len(k) == len(KEYS) and all(dict(k)[n] == key[n] for n in names)
                    ]
                )
    return out


def widest_grids(groups: dict[GroupKey, GridFit]) -> dict[str, GridFit]:
    """``widest_table`` of quantile grids (the lowest quantiles below 0.5, the highest above)."""
    return widest_table(groups, _widest)


def log_bands(g: GridFit, level: float) -> dict[str, LogBand]:
    """A group's ``LogBand`` of each metric: edges at the (1 -/+ level) / 2 quantiles, the grid."""
    out = {}
    for m in METRICS:
        grid = tuple((p, float(v)) for p, v in zip(GRID_PROBS, g.q[m], strict=True))
        band = LogBand(0.0, 0.0, grid)
        out[m] = LogBand(band.quantile((1 - level) / 2), band.quantile((1 + level) / 2), grid)
    return out


def fit_table(
    rows: pd.DataFrame, level: float = 0.8, min_rows: int = MIN_ROWS
) -> tuple[BandTable, dict[GroupKey, GridFit], dict[str, GridFit]]:
    """The band table of GPU-held-out residual ``rows`` (module docstring), its groups' fits and
    its widest grids (``widest_by_tier``)."""
    groups = fit_grids(rows, min_rows)
    widest = widest_grids(groups)
    table = BandTable(
        level,
        {k: log_bands(g, level) for k, g in groups.items()},
        {k: log_bands(g, level) for k, g in widest.items()},
        frozenset(rows["gpu_name"].astype(str)),
        frozenset(rows["model_name"].astype(str)),
        {"basis": "gpu held out"},
        {k: (g.n, g.campaigns) for k, g in groups.items()},
        gpu_held_out=True,
    )
    return table, groups, widest
