"""Rows whose serving regime the data leave open, and the band's score against both regimes.

An aggregated run of a fixed-length, closed-loop benchmark on a prefill-first engine whose clients
start together either stays in lockstep for the whole run (the server ran without mixing prefill
chunks into decode steps, SGLang's default) or settles into the steady state ``serving.solve_agg``
prices (it mixed them). The launch flag decides; a row that does not record it (``mixed_chunk``
empty) but records the run its harness would name (``alt_bench_requests``, the layout's column)
gets both predictions, and its band residual is measured from the nearer one (0 between them):
the band then says how far a measurement falls from the regime it ran in, and a row of an
unknown regime is given the band around both. A user's prediction names its regime (a named run
with fixed lengths on a prefill-first engine is priced in lockstep, ``batch_eval.lasting_lockstep``;
anything else in the steady state), so it gets the band around its one prediction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.engines import prefill_first
from planner.replay_e2e.predict import predict

ALT_REQUESTS = "alt_bench_requests"
"""Optional column: the requests of the run the row's harness names, for a row whose regime is
open (priced a second time as that named run with fixed lengths)."""
METRICS = ("ttft", "tpot")


def open_regime(pred: pd.DataFrame) -> np.ndarray:
    """Whether each row's regime is open: aggregated, on a prefill-first engine, with an
    ``alt_bench_requests``, its server's chunk mixing not recorded (``mixed_chunk`` absent or
    empty) and its run not already named (``bench_requests``)."""
    if ALT_REQUESTS not in pred or "mode" not in pred:
        return np.zeros(len(pred), dtype=bool)
    alt = pd.to_numeric(pred[ALT_REQUESTS], errors="coerce").notna()
    agg = pred["mode"].astype(str) == "agg"
    first = pred["backend"].astype(str).map(prefill_first).astype(bool)
    unknown = pd.Series(True, index=pred.index)
    for col in ("mixed_chunk", "bench_requests"):
        if col in pred:
            unknown &= pd.to_numeric(pred[col], errors="coerce").isna()
    return np.asarray(alt & agg & first & unknown)


def with_alternatives(pred: pd.DataFrame, progress: bool = False) -> pd.DataFrame:
    """``pred`` with ``alt_ttft_ms`` / ``alt_tpot_ms``: for rows of an open regime
    (``open_regime``), the prediction of the lasting lockstep (the harness's named run, fixed
    lengths) with the row's own held-out constants (``const_*``); NaN elsewhere."""
    out = pred.copy()
    for m in METRICS:
        out[f"alt_{m}_ms"] = np.nan
    sel = open_regime(out)
    if not sel.any():
        return out
    sub = out.loc[sel].drop(columns=[c for c in out.columns if c.startswith("pred_")])
    sub["bench_requests"] = pd.to_numeric(sub[ALT_REQUESTS], errors="coerce").astype(float)
    sub["fixed_lengths"] = 1.0
    got = predict(sub, progress=progress)
    for m in METRICS:
        out.loc[sel, f"alt_{m}_ms"] = got[f"pred_{m}_ms"].to_numpy(float)
    return out


def envelope(pred: pd.DataFrame, m: str) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) prediction of metric ``m`` per row, ms: the two regimes' where the row has
    an alternative (``with_alternatives``), else the prediction twice."""
    p = pred[f"pred_{m}_ms"].to_numpy(float)
    col = f"alt_{m}_ms"
    alt = pred[col].to_numpy(float) if col in pred else np.full(p.size, np.nan)
    alt = np.where(np.isfinite(alt), alt, p)
    return np.minimum(p, alt), np.maximum(p, alt)


def envelope_residual(meas: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """ln(measured / the nearer edge of [lower, upper]): negative below, positive above, 0 inside
    (with lower = upper, ln(measured / predicted))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        below, above = np.log(meas / lower), np.log(meas / upper)
    return np.where(below < 0.0, below, np.where(above > 0.0, above, 0.0))


def band_edges(
    lower: np.ndarray, upper: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The measured values whose ``envelope_residual`` lies in [q_lo, q_hi], as (lo, hi) ms: a
    negative quantile extends the lower prediction down, a positive one the upper prediction up
    (a positive lower quantile starts above the upper prediction)."""
    lo = np.where(q_lo <= 0.0, lower * np.exp(q_lo), upper * np.exp(q_lo))
    hi = np.where(q_hi >= 0.0, upper * np.exp(q_hi), lower * np.exp(q_hi))
    return lo, hi
