"""Prediction bands around replayed e2e rows: each row's band keys (engine, mode, load, tier) and
its band edges in ms, from the committed table (``planner/calibration/bands.yaml``,
``planner.uncertainty.bands``) or, held out by GPU, from a table fitted on the other GPUs'
held-out residuals (``gpu_fold_bands``), with the share of rows at or below each predicted
quantile (``quantile_calibration``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS
from planner.replay_e2e import regimes
from planner.uncertainty.bands import KEYS, BandTable, load_bands, load_bucket, provenance_tier
from planner.uncertainty.grid_fit import fit_table

METRICS = ("ttft", "tpot")
CALIBRATION_PROBS = (0.5, 0.8, 0.9, 0.95)
"""Probabilities c whose predicted quantiles ``quantile_calibration`` scores: the share of rows
at or below the c-quantile should be c."""


def add_band_keys(pred: pd.DataFrame) -> pd.DataFrame:
    """Predicted rows (``predict.predict``) with the band keys: engine, mode, load, tier."""
    out = pred.copy()
    out["engine"], out["load"] = (
        out["backend"].astype(str),
        load_bucket(out["pred_prefill_util"].to_numpy(float)),
    )
    tiers: dict[tuple[str, str, int, int], str] = {}
    keys = list(
        zip(
            out["model_path"].astype(str),
            out["system"].astype(str),
            out["c_weight_quant"].astype(int),
            out["c_kv_dtype"].astype(int),
            strict=True,
        )
    )
    for k in set(keys):
        tiers[k] = provenance_tier(
            load_model(k[0]), get_gpu(k[1]), WEIGHT_QUANTS[k[2]], KV_DTYPES[k[3]]
        )
    out["tier"] = [tiers[k] for k in keys]
    return out


def row_bands(table: BandTable, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row, the band's log quantiles of each metric (``<metric>_lo`` / ``<metric>_hi``) and
    its c-quantile of each ``CALIBRATION_PROBS`` entry (``<metric>_q<c>``)."""
    names = [f"{m}_{e}" for m in METRICS for e in ("lo", "hi")]
    names += [f"{m}_q{c}" for m in METRICS for c in CALIBRATION_PROBS]
    out = {n: np.empty(len(rows)) for n in names}
    cols = [*KEYS, "gpu_name", "model_name"]
    for key, idx in rows.groupby(cols).indices.items():
        k = dict(zip(cols, map(str, key), strict=True))
        b = table.lookup({n: k[n] for n in KEYS}, gpu=k["gpu_name"], model=k["model_name"])
        for m in METRICS:
            out[f"{m}_lo"][idx], out[f"{m}_hi"][idx] = b[m].lo, b[m].hi
            for c in CALIBRATION_PROBS:
                out[f"{m}_q{c}"][idx] = b[m].quantile(c, table.level)
    return out


def keyed_residuals(pred: pd.DataFrame) -> pd.DataFrame:
    """Predicted rows (``predict.predict``), positional, with their band keys, model and GPU
    names, the other regime's prediction where the regime is open (``regimes``) and the log
    residual ln(measured / the nearer prediction) of each metric (``res_<metric>``)."""
    keyed = add_band_keys(regimes.with_alternatives(pred)).reset_index(drop=True)
    keyed["model_name"] = keyed["model_path"].astype(str).map(lambda p: load_model(p).name)
    keyed["gpu_name"] = keyed["system"].astype(str).map(lambda s: get_gpu(s).name)
    for m in METRICS:
        keyed[f"res_{m}"] = regimes.envelope_residual(
            keyed[f"silicon_{m}_ms"].to_numpy(float), *regimes.envelope(keyed, m)
        )
    return keyed


def _band_columns(
    pred: pd.DataFrame, keyed: pd.DataFrame, b: dict[str, np.ndarray]
) -> pd.DataFrame:
    """``pred`` with pred_<metric>_ms_lo/hi: the bands ``b`` (``row_bands`` of ``keyed``) around
    each prediction (around both predictions of a row whose regime is open)."""
    out = pred.copy()
    for m in METRICS:
        out[f"pred_{m}_ms_lo"], out[f"pred_{m}_ms_hi"] = regimes.band_edges(
            *regimes.envelope(keyed, m), b[f"{m}_lo"], b[f"{m}_hi"]
        )
    return out


def with_band_columns(pred: pd.DataFrame, table: BandTable | None = None) -> pd.DataFrame:
    """Predicted rows (``predict.predict``) with pred_ttft_ms_lo/hi and pred_tpot_ms_lo/hi: the
    band of the committed table (``planner.uncertainty.bands.load_bands``) around each prediction
    (around both predictions of a row whose regime is open, ``regimes.band_edges``)."""
    keyed = keyed_residuals(pred)
    return _band_columns(pred, keyed, row_bands(table or load_bands(), keyed))


def gpu_fold_bands(pred: pd.DataFrame, folds: np.ndarray, level: float) -> pd.DataFrame:
    """GPU-held-out predicted rows with, per fold, the band of a table fitted on the other folds'
    held-out residuals (``planner.uncertainty.grid_fit.fit_table``: the band table refitted as the
    engine constants were), and ``res_<metric>`` / ``q_<metric>_<c>``: each row's residual and its
    predicted c-quantiles (``quantile_calibration``)."""
    keyed = keyed_residuals(pred)
    ok = np.isfinite(keyed["res_ttft"].to_numpy(float)) & np.isfinite(
        keyed["res_tpot"].to_numpy(float)
    )
    parts = []
    for f in np.unique(folds):
        train, test = keyed[(folds != f) & ok], keyed[folds == f].reset_index(drop=True)
        b = row_bands(fit_table(train.reset_index(drop=True), level)[0], test)
        part = _band_columns(pred[folds == f], test, b)
        for m in METRICS:
            part[f"res_{m}"] = test[f"res_{m}"].to_numpy(float)
            for c in CALIBRATION_PROBS:
                part[f"q_{m}_{c}"] = b[f"{m}_q{c}"]
        parts.append(part)
    return pd.concat(parts).loc[pred.index]


def _calibration(sub: pd.DataFrame) -> dict[str, dict[str, float]]:
    return {
        m: {
            f"at_or_below_q{c}_pct": round(
                float((sub[f"res_{m}"] <= sub[f"q_{m}_{c}"]).mean()) * 100.0, 1
            )
            for c in CALIBRATION_PROBS
        }
        for m in METRICS
    }


def quantile_calibration(pred: pd.DataFrame) -> list[dict[str, object]]:
    """Share (%) of rows at or below their predicted c-quantile of each metric, for each
    ``CALIBRATION_PROBS`` c (calibrated: c x 100), overall and per engine x mode, GPU x mode."""
    out: list[dict[str, object]] = [{"by": "overall", "key": "all", "n": len(pred)}]
    out[0] |= _calibration(pred)
    for pair in (("backend", "mode"), ("system", "mode")):
        for k, sub in pred.groupby(list(pair)):
            row: dict[str, object] = {"by": " x ".join(pair), "key": "/".join(map(str, k))}
            out.append(row | {"n": len(sub)} | _calibration(sub))
    return out
