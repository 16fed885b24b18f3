"""The band table of GPU-held-out residuals (``python -m lab.bands``, ``--holdout gpu``):
predictions, leave-one-GPU-out scoring and the YAML of quantile grids (see ``lab.bands``)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from lab.bands import (
    METRICS,
    BandDict,
    CalibrationRow,
    CoverageRow,
    GroupDict,
    TableDict,
    _read_predictions,
    _width_pct,
    coverage_report,
    residual_rows,
)
from lab.prepare_e2e import prepare_frame
from planner.replay_e2e.bands import CALIBRATION_PROBS, row_bands
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.holdout import gpu_holdout
from planner.replay_e2e.layout import drop_duplicates, read_measurements
from planner.uncertainty.grid_fit import GRID_PROBS, MIN_ROWS, SHRINK_ROWS, GridFit, fit_table


def gpu_held_out_predictions(data: list[Path], progress: bool = True) -> tuple[pd.DataFrame, int]:
    """(GPU-held-out predictions of every modelled row of the files ``data``, rows in the files):
    each file prepared by the lab step (``prepare_e2e``), the files concatenated, a measurement in
    two counting once, each GPU priced with engine constants refitted on the other GPUs' rows
    (``planner validate e2e --holdout gpu``)."""
    frames = [prepare_frame(read_measurements(d)) for d in data]
    df, duplicates = drop_duplicates(pd.concat(frames, ignore_index=True, sort=False))
    pred, _ = gpu_holdout(prepare(df).rows, progress)
    return pred, len(df) + duplicates


def _scored(rows: pd.DataFrame, test: pd.DataFrame, level: float) -> pd.DataFrame:
    """``test`` rows against the table fitted on ``rows``: inside the band, its width (% of the
    prediction), at or below each predicted c-quantile (``le_<metric>_<c>``)."""
    b = row_bands(fit_table(rows.reset_index(drop=True), level)[0], test)
    part = test.copy()
    for m in METRICS:
        r = part[f"res_{m}"].to_numpy(float)
        part[f"in_{m}"] = (r >= b[f"{m}_lo"]) & (r <= b[f"{m}_hi"])
        part[f"width_{m}_pct"] = _width_pct(part, m, b[f"{m}_lo"], b[f"{m}_hi"])
        for c in CALIBRATION_PROBS:
            part[f"le_{m}_{c}"] = r <= b[f"{m}_q{c}"]
    return part


def gpu_out_of_fold(rows: pd.DataFrame, level: float) -> pd.DataFrame:
    """Residual rows (``residual_rows``) scored leave one GPU out: each GPU's rows against the
    table fitted on the other GPUs' residuals (``_scored``)."""
    gpu = rows["gpu_name"].astype(str).to_numpy()
    parts = [
        _scored(rows[gpu != g], rows[gpu == g].reset_index(drop=True), level)
        for g in sorted(set(gpu))
    ]
    return pd.concat(parts, ignore_index=True)


def calibration_report(oof: pd.DataFrame) -> list[CalibrationRow]:
    """Share (%) of rows at or below their predicted c-quantile (calibrated: 100 c), overall, per
    engine x mode, per GPU and per mode."""

    def one(by: str, key: str, sub: pd.DataFrame) -> CalibrationRow:
        shares = {
            m: {
                f"q{c}": round(float(sub[f"le_{m}_{c}"].mean()) * 100, 1) for c in CALIBRATION_PROBS
            }
            for m in METRICS
        }
        return CalibrationRow(by=by, key=key, n=len(sub), ttft=shares["ttft"], tpot=shares["tpot"])

    out = [one("overall", "all", oof)]
    for by in (["engine", "mode"], ["gpu_name"], ["mode"]):
        out += [
            one(" x ".join(by), " x ".join(map(str, k if isinstance(k, tuple) else (k,))), s)
            for k, s in oof.groupby(by)
        ]
    return out


def _band(g: GridFit, m: str, level: float) -> BandDict:
    grid = [[p, round(float(v), 4)] for p, v in zip(GRID_PROBS, g.q[m], strict=True)]
    lo, hi = (float(np.interp(p, GRID_PROBS, g.q[m])) for p in ((1 - level) / 2, (1 + level) / 2))
    return BandDict(lo=round(lo, 4), hi=round(hi, 4), grid=grid)


def grid_table_dict(rows: pd.DataFrame, level: float) -> TableDict:
    """The YAML layout of the table fitted on all residual ``rows``."""
    table, groups, widest = fit_table(rows, level)
    listed = [
        GroupDict(
            key=dict(key),
            n=g.n,
            campaigns=g.campaigns,
            ttft=_band(g, "ttft", level),
            tpot=_band(g, "tpot", level),
        )
        for key, g in sorted(groups.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    ]
    return TableDict(
        level=level,
        gpu_held_out=True,
        groups=listed,
        widest_by_tier={n: {m: _band(g, m, level) for m in METRICS} for n, g in widest.items()},
        gpus=sorted(table.gpus),
        models=sorted(table.models),
    )


def _sha256(paths: list[Path]) -> str:
    return " ".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths)


def build_gpu(
    data: list[Path],
    level: float,
    predictions: Path | None = None,
    command: str = "",
    progress: bool = True,
    predictions_out: Path | None = None,
    force: bool = False,
) -> TableDict:
    """The band table of GPU-held-out residuals of the files ``data`` (predicted here, or read
    from ``predictions``, a ``validate e2e --holdout gpu --predictions-out`` CSV of the same
    files), with its provenance, leave-one-GPU-out coverage and quantile calibration."""
    if predictions is None:
        pred, n_data = gpu_held_out_predictions(data, progress)
        if predictions_out is not None:
            from planner.safe_files import write_new_file

            write_new_file(predictions_out, pred.to_csv(index=False).encode(), force)
        source = (
            "GPU held out: each GPU priced with engine constants refitted on the other GPUs' "
            "rows (planner.replay_e2e.holdout, as validate e2e --holdout gpu)"
        )
    else:
        pred = _read_predictions(predictions)
        n_data = sum(len(pd.read_csv(d, low_memory=False)) for d in data)
        source = f"{predictions} (validate e2e --holdout gpu --predictions-out)"
    rows = residual_rows(pred)
    oof = gpu_out_of_fold(rows, level)
    table = grid_table_dict(rows, level)
    table["provenance"] = {
        "data": " ".join(map(str, data)),
        "data_sha256": _sha256(data),
        "data_rows": n_data,
        "rows_used": len(rows),
        "gpus": int(rows["gpu_name"].nunique()),
        "campaigns": int(rows["campaign"].nunique()),
        "predictions": source,
        "fold_rule": "leave one GPU out (each GPU scored against the table fitted on the other "
        "GPUs' residuals); rows repeating a configuration, measurement and prediction under "
        "another id, source or model label dropped",
        "min_group_rows": MIN_ROWS,
        "shrink_rows": SHRINK_ROWS,
        "weighting": "sqrt",
        "date": dt.date.today().isoformat(),
        "command": command,
        "method": "quantile grids (planner.uncertainty.grid_fit) of ln(measured/predicted) of "
        "GPU-held-out predictions, every row counting 1/sqrt(its campaign's rows in the group), "
        f"groups shrunk toward their parent with {SHRINK_ROWS:g} rows of prior weight",
    }
    table["out_of_fold"] = _coverage(oof)
    table["quantile_calibration"] = calibration_report(oof)
    return table


def _coverage(oof: pd.DataFrame) -> list[CoverageRow]:
    """``coverage_report`` of the leave-one-GPU-out rows, plus per GPU."""
    out = coverage_report(oof)
    for key, sub in oof.groupby("gpu_name"):
        row = coverage_report(sub)[0]
        row["by"], row["key"] = "gpu", str(key)
        out.append(row)
    return out
