"""Error statistics of replayed e2e rows: median / p90 absolute percentage error, band coverage,
groups by engine, mode, GPU and model, and the rows off by more than a factor."""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.replay_e2e.layout import UNMODELLABLE

GROUP_BY: tuple[str, ...] = ("backend", "mode", "system", "model")
CROSSED: tuple[tuple[str, str], ...] = (("system", "mode"), ("backend", "mode"))
"""Pairs of columns also grouped together ("system x mode": a GPU's aggregated and disaggregated
figures, the headline of a GPU-held-out run)."""
OFF_FACTOR = 3.0
"""A row is grossly off when its prediction is more than this factor from the measurement, either
way, on TTFT or TPOT (|ln(predicted / measured)| > ln 3)."""
CLIENT_BUCKETS: tuple[tuple[float, str], ...] = (
    (8.0, "<=8"),
    (32.0, "9-32"),
    (128.0, "33-128"),
    (np.inf, ">128"),
)
"""Closed-loop clients of a row (``clients``) in the buckets the "backend x mode x clients" groups
use: upper edge (inclusive) and name."""
UNMODELLABLE_CAP_PCT = 1.0
"""Rows named unmodellable (the ``unmodellable`` column) may be at most this share (%) of the
modelled rows."""


def band_coverage_pct(meas: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share (%) of measured values inside their band [lo, hi]."""
    ok = np.isfinite(meas) & np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return float("nan")
    return float(np.mean((meas[ok] >= lo[ok]) & (meas[ok] <= hi[ok])) * 100.0)


def error_stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """median / p90 absolute percentage error and median signed error, percent."""
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    if not ok.any():
        return {
            "median_ape_pct": float("nan"),
            "p90_ape_pct": float("nan"),
            "median_signed_pct": float("nan"),
        }
    signed = (pred[ok] - meas[ok]) / meas[ok] * 100.0
    return {
        "median_ape_pct": float(np.median(np.abs(signed))),
        "p90_ape_pct": float(np.percentile(np.abs(signed), 90)),
        "median_signed_pct": float(np.median(signed)),
    }


def _stats(sub: pd.DataFrame, m: str) -> dict[str, float]:
    meas = sub[f"silicon_{m}_ms"].to_numpy(float)
    out = error_stats(sub[f"pred_{m}_ms"].to_numpy(float), meas)
    if f"pred_{m}_ms_lo" in sub:
        out["band_coverage_pct"] = band_coverage_pct(
            meas, sub[f"pred_{m}_ms_lo"].to_numpy(float), sub[f"pred_{m}_ms_hi"].to_numpy(float)
        )
    return out


def clients(pred: pd.DataFrame) -> np.ndarray:
    """Clients of each row: its ``batch_size``, else its ``concurrency`` column (the layout's
    closed-loop clients), else the replayed concurrency (``c_concurrency``); NaN without any."""
    out = np.full(len(pred), np.nan)
    for col in ("c_concurrency", "concurrency", "batch_size"):  # the last given wins
        if col in pred:
            v = pd.to_numeric(pred[col], errors="coerce").to_numpy(float)
            out = np.where(np.isfinite(v), v, out)
    return out


def client_bucket(pred: pd.DataFrame) -> np.ndarray:
    """``CLIENT_BUCKETS`` name of each row's ``clients`` ("?" where unknown)."""
    c = clients(pred)
    edges = np.array([e for e, _ in CLIENT_BUCKETS[:-1]])
    names = np.array([n for _, n in CLIENT_BUCKETS])
    return np.where(np.isfinite(c), names[np.searchsorted(edges, c, side="left")], "?")


def summarize(pred: pd.DataFrame) -> list[dict[str, object]]:
    """Error groups: overall, then by backend, mode, system and model, then by each pair of
    ``CROSSED`` (key "h200_sxm/agg"), then by backend x mode x clients (``client_bucket``; key
    "sglang/agg/9-32")."""
    frame = pred.assign(model=pred["model_path"], clients=client_bucket(pred))

    def one(by: str, key: str, sub: pd.DataFrame) -> dict[str, object]:
        return {
            "by": by,
            "key": key,
            "n": int(len(sub)),
            **{m: _stats(sub, m) for m in ("ttft", "tpot")},
        }

    groups = [one("overall", "all", frame)]
    for by in GROUP_BY:
        groups += [one(by, str(k), sub) for k, sub in frame.groupby(by)]
    for pair in CROSSED:
        groups += [
            one(" x ".join(pair), "/".join(map(str, k)), sub)
            for k, sub in frame.groupby(list(pair))
        ]
    triple = ["backend", "mode", "clients"]
    groups += [
        one(" x ".join(triple), "/".join(map(str, k)), sub) for k, sub in frame.groupby(triple)
    ]
    return groups


def modelled(pred: pd.DataFrame, skipped: dict[str, int]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rows with finite predictions, and ``skipped`` with the others counted."""
    bad = ~np.isfinite(pred["pred_ttft_ms"]) | ~np.isfinite(pred["pred_tpot_ms"])
    out = dict(skipped)
    if bad.any():
        out["does_not_fit_or_saturated"] = int(bad.sum())
    return pred[~bad], out


def named_unmodellable(pred: pd.DataFrame) -> np.ndarray | None:
    """Whether each row is named unmodellable (a cause in its ``unmodellable`` column); None
    without the column."""
    if UNMODELLABLE not in pred:
        return None
    cause = pred[UNMODELLABLE]
    return np.asarray(cause.notna() & (cause.astype(str) != ""), dtype=bool)


def off_by_factor(pred: pd.DataFrame, factor: float = OFF_FACTOR) -> dict[str, float]:
    """Rows of ``pred`` whose TTFT, TPOT, or either is off by more than ``factor`` either way,
    and the share (%) of rows off on either; with an ``unmodellable`` column, how many of the
    rows off are named there, how many are not, and the named rows' share (%) of all rows."""
    out: dict[str, float] = {"factor": factor}
    off = np.zeros(len(pred), dtype=bool)
    for m in ("ttft", "tpot"):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(
                pred[f"pred_{m}_ms"].to_numpy(float) / pred[f"silicon_{m}_ms"].to_numpy(float)
            )
        this = np.abs(r) > np.log(factor)
        out[m], off = int(this.sum()), off | this
    out["either"] = int(off.sum())
    out["share_pct"] = round(100.0 * float(off.mean()), 2) if len(pred) else 0.0
    listed = named_unmodellable(pred)
    if listed is not None:
        out["named"] = int((off & listed).sum())
        out["not_named"] = int((off & ~listed).sum())
        out["named_share_pct"] = round(100.0 * float(listed.mean()), 2) if len(pred) else 0.0
        out["named_cap_pct"] = UNMODELLABLE_CAP_PCT
    return out
