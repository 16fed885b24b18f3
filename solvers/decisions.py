"""Decision-level validation: among measured deployments of one group, is our top pick the best?

Groups are (model, system, backend, precision, isl, osl, mode) of a file in the e2e layout
(``planner.replay_e2e.layout``; the figures of ``silicon_measured.csv`` come from its prepared rows,
``python -m lab.prepare_e2e``). Every row is a configuration run as a closed loop of N clients; its
output tokens/s per GPU is N / (TTFT + (osl-1)·TPOT) · osl / GPUs, computed the same way from the
measured and from our predicted TTFT and TPOT (means). The rows, their configurations and the
predictions are exactly those of ``planner validate e2e`` (:mod:`planner.replay_e2e.predict`: one
vectorized ``evaluate_batch`` call per group), so the two checks never disagree about a row. Within
a group of the rows we model, the measured best is the row with the highest measured tok/s/GPU that
meets the stated SLO as measured; our pick is the row with the highest predicted tok/s/GPU among the
rows we predict to meet it (all rows when we predict none). A group counts as top-1 when our pick is
the measured best and as within-5% when our pick meets the SLO as measured and reaches >= 95% of the
best's measured throughput. Groups with fewer than two modelled rows or none meeting the SLO as
measured are skipped. Held out (``holdout``), every row is priced as ``planner validate e2e
--holdout gpu|campaign`` prices it: with engine constants refitted on the other GPUs' (or
campaigns') rows (:mod:`planner.replay_e2e.holdout`); several files are read together, a
measurement in two of them counting once (:func:`planner.replay_e2e.layout.read_rows`).
DataFrames stay here, at the edge.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from hardware.input_files import require_columns
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.holdout import campaign_holdout, gpu_holdout
from planner.replay_e2e.layout import Paths, read_rows
from planner.replay_e2e.predict import predict

DEFAULT_TTFT_MS = 3000.0
"""Stated SLO of the check: interactive chat, first token within 3 s ..."""
DEFAULT_TPOT_MS = 50.0
"""... and at least 20 tokens/s per user."""
GROUP_KEYS = ["model_path", "system", "backend", "precision", "isl", "osl", "mode"]
WITHIN = 0.95
HOLDOUTS = ("gpu", "campaign", "none")


def deployment_gpus(rows: pd.DataFrame) -> np.ndarray:
    """GPUs of each prepared row's deployment (agg: tp·pp·dp; disagg: both roles times their
    workers)."""
    ones = pd.Series(1.0, index=rows.index)  # a column no prepared row filled (all agg: no workers)
    c = lambda name: rows.get(f"c_{name}", ones).fillna(1.0).to_numpy(dtype=float)  # noqa: E731
    dec = c("tp") * c("pp") * c("dp") * c("workers")
    pre = c("prefill_tp") * c("prefill_pp") * c("prefill_dp") * c("prefill_workers")
    return np.where(c("mode") == 1, dec + pre, dec)


def closed_loop_tok_per_gpu(
    rows: pd.DataFrame, ttft_ms: np.ndarray, tpot_ms: np.ndarray
) -> np.ndarray:
    """Output tokens/s per GPU of a closed loop of N clients:
    N / (TTFT + (osl-1)·TPOT) · osl / GPUs."""
    n = rows["c_concurrency"].to_numpy(dtype=float)
    osl = rows["osl"].to_numpy(dtype=float)
    cycle_s = (ttft_ms + (osl - 1.0) * tpot_ms) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        return n / cycle_s * osl / deployment_gpus(rows)


def judge(
    meas_tok: np.ndarray, meas_ok: np.ndarray, pred_tok: np.ndarray, pred_ok: np.ndarray
) -> tuple[bool, bool]:
    """(top-1, within 5%) for one group (see the module docstring)."""
    best = int(np.argmax(np.where(meas_ok, meas_tok, -np.inf)))
    pool = pred_ok if pred_ok.any() else np.ones_like(pred_ok)
    pick = int(np.argmax(np.where(pool, np.nan_to_num(pred_tok, nan=-1.0, posinf=-1.0), -np.inf)))
    within = bool(meas_ok[pick]) and meas_tok[pick] >= WITHIN * meas_tok[best]
    return pick == best, within or pick == best


def _predicted(rows: pd.DataFrame, holdout: str, folds: int) -> pd.DataFrame:
    """Prepared ``rows`` priced in sample (``holdout`` "none") or held out by GPU or campaign."""
    if holdout == "gpu":
        return gpu_holdout(rows, progress=False)[0]
    if holdout == "campaign":
        return campaign_holdout(rows, folds, progress=False)[0]
    return predict(rows, progress=False)


def _judged(rows: pd.DataFrame) -> tuple[list[dict[str, object]], int]:
    """(one entry per judged group, groups skipped) of priced ``rows`` with their tok/s columns."""
    out: list[dict[str, object]] = []
    skipped = 0
    for key, g in rows.groupby(GROUP_KEYS, sort=True):
        meas_ok = g["meas_ok"].to_numpy(dtype=bool)
        if len(g) < 2 or not meas_ok.any():
            skipped += 1
            continue
        top1, within = judge(
            g["meas_tok"].to_numpy(dtype=float),
            meas_ok,
            g["pred_tok"].to_numpy(dtype=float),
            g["pred_ok"].to_numpy(dtype=bool),
        )
        out.append(
            {
                "group": "/".join(map(str, key)),
                "system": str(key[GROUP_KEYS.index("system")]),
                "rows": len(g),
                "top1": top1,
                "within5": within,
            }
        )
    return out, skipped


def _shares(groups: list[dict[str, object]]) -> dict[str, object]:
    """Groups, and the share (%) of them top-1 and within 5 %."""
    n = len(groups)
    pct = (lambda k: round(100.0 * sum(bool(r[k]) for r in groups) / n, 1)) if n else None
    return {
        "groups": n,
        "top1_pct": pct("top1") if pct else 0.0,
        "within5_pct": pct("within5") if pct else 0.0,
    }


def validate_decisions(
    path: Paths,
    *,
    ttft_ms: float = DEFAULT_TTFT_MS,
    tpot_ms: float = DEFAULT_TPOT_MS,
    holdout: str = "none",
    folds: int = 5,
) -> dict[str, object]:
    """``{"groups": G, "top1_pct": ..., "within5_pct": ...}`` of the rows of ``path`` (one file or
    several), plus the same per GPU, skip counts and per-group rows; ``holdout``: "none" (the
    shipped constants), "gpu" or "campaign" (``folds`` folds) as ``validate e2e`` holds out."""
    if holdout not in HOLDOUTS:
        raise PlannerInputError("--holdout", f"'{holdout}' not one of {sorted(HOLDOUTS)}")
    files = [Path(path)] if isinstance(path, (str, Path)) else [Path(p) for p in path]
    for f in files:
        if not f.is_file():
            raise PlannerInputError("--data", f"{f} does not exist")
    df, duplicates = read_rows(files)
    require_columns(df, GROUP_KEYS, "--data " + ", ".join(map(str, files)))
    prep = prepare(df)
    if prep.rows.empty:
        raise PlannerInputError(
            "--data",
            f"no row of {', '.join(map(str, files))} can be modelled (skipped: {prep.skipped})",
        )
    rows = _predicted(prep.rows, holdout, folds)
    pt, pp = rows["pred_ttft_ms"].to_numpy(dtype=float), rows["pred_tpot_ms"].to_numpy(dtype=float)
    mt, mp = (
        rows["silicon_ttft_ms"].to_numpy(dtype=float),
        rows["silicon_tpot_ms"].to_numpy(dtype=float),
    )
    rows = rows.assign(
        meas_tok=closed_loop_tok_per_gpu(rows, mt, mp),
        pred_tok=closed_loop_tok_per_gpu(rows, pt, pp),
        meas_ok=(mt <= ttft_ms) & (mp <= tpot_ms),
        pred_ok=np.isfinite(pt) & np.isfinite(pp) & (pt <= ttft_ms) & (pp <= tpot_ms),
    )
    out, skipped = _judged(rows)
    systems = sorted({str(r["system"]) for r in out})
    return {
        **_shares(out),
        "holdout": holdout,
        "by_gpu": {g: _shares([r for r in out if r["system"] == g]) for g in systems},
        "skipped_groups": skipped,
        "duplicates_dropped": duplicates,
        "rows_not_modelled": prep.skipped,
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms},
        "per_group": out,
    }
