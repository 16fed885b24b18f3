"""A calibration profile's own prediction bands: out-of-sample residuals of the user's rows.

``planner calibrate e2e`` cross-fits each engine's rows in two halves (sorted by mode and
concurrency, alternate rows: the constants fitted on one half predict the other, and back), so
every row has a residual ln(measured / predicted) from constants that did not see it. Per mode,
the split-conformal quantiles of those residuals at the packaged band table's level are the
profile's bands (:class:`ModeBands`, stored in the profile with their row count). Given a profile,
estimate and plan take its :func:`profile_bands` in place of the packaged table (a
``planner.uncertainty.bands.Bands`` value passed with the request), and say which; a mode with
fewer than
``MIN_ROWS`` rows keeps the table's band, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from planner.uncertainty.bands import Bands, LogBand, load_bands

MIN_ROWS = 9
"""Fewest out-of-sample rows of one engine and mode for its own band: the two-sided 80 %
split-conformal interval takes the ceil(0.9 (n + 1))-th smallest residual, which exists from 9."""
METHOD = (
    "alternate-row cross-fit (rows sorted by mode and concurrency; each half's constants predict "
    "the other half), split-conformal quantiles of ln(measured / predicted)"
)
MODES = ("agg", "disagg")


class MetricBand(BaseModel):
    """Quantiles of ln(measured / predicted) of one metric (natural log)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    lo: float = Field(ge=-10.0, le=10.0, description="Lower quantile of ln(measured/predicted).")
    hi: float = Field(ge=-10.0, le=10.0, description="Upper quantile of ln(measured/predicted).")


class ModeBands(BaseModel):
    """One mode's own bands (``None`` with fewer than ``MIN_ROWS`` rows) and their row count."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rows: int = Field(ge=0, description="Rows whose out-of-sample residuals made the band.")
    level: float = Field(gt=0.0, lt=1.0, description="Coverage level of the band, e.g. 0.8.")
    method: str = Field(default=METHOD, description="How the residuals were made and used.")
    ttft: MetricBand | None = Field(default=None, description="TTFT band (None: too few rows).")
    tpot: MetricBand | None = Field(default=None, description="TPOT band (None: too few rows).")


def conformal(residuals: np.ndarray, level: float) -> MetricBand | None:
    """Split-conformal (lo, hi) of finite ``residuals`` at ``level`` (the packaged table's
    ``planner.replay_e2e.conformal.conformal_band``); None with fewer than ``MIN_ROWS``."""
    from planner.replay_e2e.conformal import conformal_band

    r = residuals[np.isfinite(residuals)]
    if r.size < MIN_ROWS:
        return None
    band = conformal_band(r, level)
    return MetricBand(lo=round(band.lo, 4), hi=round(band.hi, 4))


def halves(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two cross-fit halves: rows sorted by mode, concurrency, ISL, OSL; alternate positions."""
    keys = [k for k in ("mode", "c_concurrency", "isl", "osl", "id") if k in rows]
    order = rows.sort_values(keys, kind="stable").reset_index(drop=True)
    return order.iloc[::2].reset_index(drop=True), order.iloc[1::2].reset_index(drop=True)


def mode_bands(held_out: pd.DataFrame, level: float | None = None) -> dict[str, ModeBands]:
    """Own bands per mode of rows predicted out of sample (``pred_*_ms``, ``silicon_*_ms``)."""
    lvl = load_bands().level if level is None else level
    out = {}
    for mode in MODES:
        sub = held_out[held_out["mode"] == mode]
        if not len(sub):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            res = {
                m: np.log(
                    sub[f"silicon_{m}_ms"].to_numpy(float) / sub[f"pred_{m}_ms"].to_numpy(float)
                )
                for m in ("ttft", "tpot")
            }
        rows = int(min(np.isfinite(r).sum() for r in res.values()))
        bands = {m: conformal(r, lvl) for m, r in res.items()}
        if any(b is None for b in bands.values()):
            bands = {"ttft": None, "tpot": None}
        out[mode] = ModeBands(rows=rows, level=lvl, **bands)
    return out


def _account(label: str, engine: str, mode: str, own: ModeBands | None, level: float) -> str:
    if own is None:
        return f"{label}: no {engine} {mode} rows, so the packaged band table"
    if own.ttft is None or own.tpot is None:
        return (
            f"{label}: {own.rows} {engine} {mode} rows out of sample, fewer than {MIN_ROWS} "
            "for its own band, so the packaged band table"
        )
    if abs(own.level - level) > 1e-9:
        return f"{label}: its bands are at level {own.level:g}, not {level:g}: the packaged table"
    return (
        f"{label}: own out-of-sample residuals of {own.rows} {engine} {mode} rows "
        f"(alternate-row cross-fit), level {level:g}"
    )


def _usable(own: ModeBands | None, level: float) -> dict[str, LogBand] | None:
    if own is None or own.ttft is None or own.tpot is None or abs(own.level - level) > 1e-9:
        return None
    return {"ttft": LogBand(own.ttft.lo, own.ttft.hi), "tpot": LogBand(own.tpot.lo, own.tpot.hi)}


def profile_bands(own_bands: Mapping[str, Mapping[str, ModeBands]], label: str) -> Bands:
    """The packaged table with a profile's own bands over it (``own_bands``: engine -> mode ->
    ``ModeBands``, as stored in the profile): per engine and mode, its own bands, or None and why
    the table's band applies."""
    table = load_bands()
    return Bands(
        table,
        {
            (engine, mode): (
                _usable(modes.get(mode), table.level),
                _account(label, engine, mode, modes.get(mode), table.level),
            )
            for engine, modes in own_bands.items()
            for mode in MODES
        },
    )
