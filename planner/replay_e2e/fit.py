"""The generic refit of per-engine constants to measured e2e rows (the code that fitted the shipped
``planner/calibration/engines.yaml``, ``python -m lab.fit_engines``, and that refits the held-out
folds, ``holdout``).

Every fitted constant (``CONSTANTS``) has a physical meaning, a unit and bounds; the fit is a
coordinate search over a grid inside the bounds (``SWEEPS`` sweeps, constants in ``CONSTANTS``
order, each from its fixed ``start``). Each constant minimises the median |ln(predicted /
measured)| over the rows of the modes it acts on (per engine, or over every engine's rows for a
``shared`` one) of what it sets: TPOT for the step-time constants (a step is what TPOT measures),
TTFT for the others. A shared constant with a ``partner`` (the first-wave share, whose TTFT
each engine's request overhead trades against at low load) is searched jointly with it: for each
share, every engine takes its best overhead, and the share with the least loss over every engine's
rows wins (``joint_pick``). Each grid is priced in one call: the rows are repeated once per grid
value (or pair of values) with per-row constants (``predict.with_constants``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.engines.calibration import EngineCalibration
from planner.replay_e2e.predict import predict, with_constants

MISSING_LOSS = 5.0
"""|ln error| charged for a row the model cannot price (out of memory, saturated): a factor e^5."""
SWEEPS = 2
ALL = "*"
"""Key of a shared constant's losses (fitted on the rows of every engine together)."""


@dataclass(frozen=True)
class Constant:
    """One fitted engine constant: name, unit, meaning, bounds and the grid searched inside them."""

    name: str
    unit: str
    meaning: str
    bounds: tuple[float, float]
    grid: tuple[float, ...]
    start: float
    modes: tuple[str, ...]  # the modes whose rows it changes (others skip its pricing)
    metrics: tuple[str, ...] = ("ttft",)  # what it is fitted to: step-time constants to TPOT
    shared: bool = (
        False  # one value for every engine (a property of the benchmarks, not the engine)
    )
    held: bool = False
    """Held at ``start`` by the packaged fit (and its held-out folds): the campaign-held-out figures
    are better without fitting it. A user's own calibration (``planner calibrate e2e``,
    ``calibration_profile.GRID``) still searches ``grid``."""
    partner: str | None = None
    """A per-engine constant of the same modes and metric searched together with this shared one
    (``joint_pick``): alone, each stops the other at the first point where neither can move."""

    def __post_init__(self) -> None:
        lo, hi = self.bounds
        assert all(lo <= g <= hi for g in self.grid) and self.start in self.grid, self.name
        assert self.partner is None or self.shared, self.name


CONSTANTS: tuple[Constant, ...] = (
    Constant(
        "kernel_scale",
        "1",
        "achieved / priced kernel time of the engine's kernels (kernel quality "
        "beyond the fitted kernel tier; 1 = as priced)",
        (0.7, 1.5),
        (0.8, 0.9, 1.0, 1.1, 1.2),
        1.0,
        ("agg", "disagg"),
        ("tpot",),
        shared=True,
        held=True,
    ),
    Constant(
        "step_overhead_s",
        "s per step",
        "CPU time per engine step not hidden behind the GPU (scheduling, sampling, graph launch)",
        (0.0, 0.01),
        (0.0, 0.001, 0.002, 0.003, 0.004, 0.006),
        0.002,
        ("agg", "disagg"),
        ("tpot",),
        shared=False,
    ),
    Constant(
        "request_overhead_s",
        "s per request",
        "time to first token outside the engine steps, aggregated (HTTP, tokenization, admission)",
        (0.0, 0.3),
        (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2),
        0.05,
        ("agg",),
    ),
    Constant(
        "disagg_request_overhead_s",
        "s per request",
        "the same for a disaggregated deployment "
        "(adds the router hop, remote-prefill dispatch, KV-transfer set-up)",
        (0.0, 0.3),
        (0.03, 0.06, 0.1, 0.13, 0.16, 0.2, 0.25),
        0.1,
        ("disagg",),
    ),
    Constant(
        "burst_fraction",
        "1 (share of requests)",
        "share 1/W of a closed-loop run's requests "
        "in its first lockstep wave (a run of W waves), aggregated campaigns",
        (0.0, 1.0),
        (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0),
        0.1,
        ("agg",),
        shared=True,
        partner="request_overhead_s",
    ),
    Constant(
        "disagg_burst_fraction",
        "1 (share of requests)",
        "the same for the disaggregated campaigns (other benchmark harnesses)",
        (0.0, 1.0),
        (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0),
        0.1,
        ("disagg",),
        shared=True,
        partner="disagg_request_overhead_s",
    ),
)
"""The fitted constants, in coordinate-search order (kernel and step time first: they set TPOT,
which the TTFT constants then build on); each first-wave share is searched jointly with its
``partner`` request overhead. Why each is fitted, held or shared: ``lab/notes/`` and the fit log
(``lab/notes/engines_fit_log.md``)."""
BY_NAME: dict[str, Constant] = {c.name: c for c in CONSTANTS}
FITTED: tuple[Constant, ...] = tuple(c for c in CONSTANTS if not c.held)
"""The constants the packaged fit searches (``Constant.held`` ones keep their start)."""

Values = dict[str, dict[str, float]]
"""Fitted constants: backend -> constant name -> value."""


def _abs_log(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    """|ln(pred / meas)| per row; ``MISSING_LOSS`` where a row has no finite answer."""
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(np.log(pred / meas))
    return np.where(np.isfinite(err), err, MISSING_LOSS)


def _median_abs_log(pred: np.ndarray, meas: np.ndarray) -> float:
    err = _abs_log(pred, meas)
    return float(np.median(err)) if err.size else 0.0


def loss(pred: pd.DataFrame, metrics: tuple[str, ...] = ("ttft", "tpot")) -> float:
    """Sum over ``metrics`` of the median |ln(pred / measured)| of the rows."""
    return sum(
        _median_abs_log(
            pred[f"pred_{m}_ms"].to_numpy(float), pred[f"silicon_{m}_ms"].to_numpy(float)
        )
        for m in metrics
    )


Overrides = dict[str, EngineCalibration] | None
"""Engines' constants replacing the packaged ones in every prediction of the fit (a profile's)."""


def _grid_losses(
    rows: pd.DataFrame, values: Values, c: Constant, overrides: Overrides = None
) -> dict[str, list[float]]:
    """Loss of each backend at each grid value of ``c``, the other constants at ``values``
    (``overrides``: engines' constants replacing the packaged ones, ``predict``)."""
    sub = rows[rows["mode"].isin(c.modes)]
    copies = []
    for g, v in enumerate(c.grid):
        copies.append(
            with_constants(sub, {b: {**vals, c.name: v} for b, vals in values.items()}).assign(
                _grid=g
            )
        )
    pred = predict(pd.concat(copies, ignore_index=True), progress=False, overrides=overrides)
    out: dict[str, list[float]] = {}
    if c.shared:
        by_g = dict(tuple(pred.groupby("_grid")))
        return {ALL: [loss(by_g[g], c.metrics) if g in by_g else 0.0 for g in range(len(c.grid))]}
    for b, by_b in pred.groupby("backend"):
        by_g = dict(tuple(by_b.groupby("_grid")))
        out[str(b)] = [loss(by_g[g], c.metrics) if g in by_g else 0.0 for g in range(len(c.grid))]
    return out


def joint_pick(err: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """The joint search's choice from per-row errors ``err`` (columns backend, i = the shared
    constant's grid index, j = the partner's, e = the row's loss): for each i every backend takes
    the j of its least median e, and the i whose rows so chosen have the least median e over every
    backend wins (ties: the lower index). Returns (i, backend -> j)."""
    per = err.groupby(["backend", "i", "j"])["e"].median()
    best: tuple[float, int, dict[str, int]] | None = None
    for i in sorted(set(err["i"])):
        pick = {
            str(b): int(g.idxmin()[2])
            for b, g in per.xs(i, level="i", drop_level=False).groupby(level="backend")
        }
        chosen = err[(err["i"] == i) & (err["j"] == err["backend"].map(pick))]
        total = float(np.median(chosen["e"]))
        if best is None or total < best[0]:
            best = (total, int(i), pick)
    assert best is not None, "no rows to search"
    return best[1], best[2]


def _joint_step(
    rows: pd.DataFrame, values: Values, c: Constant, overrides: Overrides = None
) -> None:
    """Set shared ``c`` and its per-engine partner in ``values`` by ``joint_pick`` over every
    pair of grid values (the rows of ``c``'s modes priced once per pair)."""
    assert c.partner is not None
    d = BY_NAME[c.partner]
    sub = rows[rows["mode"].isin(c.modes)]
    if sub.empty:
        return
    copies = [
        with_constants(
            sub, {b: {**vals, c.name: s, d.name: v} for b, vals in values.items()}
        ).assign(_i=i, _j=j)
        for i, s in enumerate(c.grid)
        for j, v in enumerate(d.grid)
    ]
    pred = predict(pd.concat(copies, ignore_index=True), progress=False, overrides=overrides)
    (metric,) = c.metrics
    err = pd.DataFrame(
        {
            "backend": pred["backend"].astype(str).to_numpy(),
            "i": pred["_i"].to_numpy(),
            "j": pred["_j"].to_numpy(),
            "e": _abs_log(
                pred[f"pred_{metric}_ms"].to_numpy(float),
                pred[f"silicon_{metric}_ms"].to_numpy(float),
            ),
        }
    )
    i, pick = joint_pick(err)
    for b in values:
        values[b][c.name] = c.grid[i]
        if b in pick:
            values[b][d.name] = d.grid[pick[b]]


def fit_constants(
    rows: pd.DataFrame, progress: bool = False, overrides: Overrides = None
) -> Values:
    """Coordinate search of every constant in ``CONSTANTS`` for each backend of prepared ``rows``
    (``e2e.prepare``); a constant whose modes have no rows of a backend keeps its ``start``."""
    values: Values = {
        str(b): {c.name: c.start for c in CONSTANTS} for b in sorted(set(rows["backend"]))
    }
    fitted = FITTED
    steps = SWEEPS * len(fitted)
    for n in range(steps):
        c = fitted[n % len(fitted)]
        if c.partner is not None:
            _joint_step(rows, values, c, overrides)
        else:
            for b, losses in _grid_losses(rows, values, c, overrides).items():
                for backend in values if b == ALL else (b,):
                    values[backend][c.name] = c.grid[int(np.argmin(losses))]
        if progress:
            sys.stderr.write(f"\rfit_engines: {n + 1}/{steps} coordinate searches")
    if progress:
        sys.stderr.write("\n")
    return values


def fitted_values(engines: Mapping[str, EngineCalibration]) -> Values:
    """The fitted constants of loaded ``engines`` as ``Values``."""
    return {
        b: {c.name: float(getattr(e, c.name).value) for c in CONSTANTS} for b, e in engines.items()
    }
