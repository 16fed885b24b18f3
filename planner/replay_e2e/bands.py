"""The committed prediction bands (``planner/calibration/bands.yaml``,
``planner.uncertainty.bands``) around
replayed e2e rows: each row's band keys (engine, mode, load, tier) and its band edges in ms."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS
from planner.replay_e2e import regimes
from planner.uncertainty.bands import KEYS, BandTable, load_bands, load_bucket, provenance_tier

METRICS = ("ttft", "tpot")


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
    """Per row, the band's log quantiles of each metric (``<metric>_lo`` / ``<metric>_hi``)."""
    out = {f"{m}_{e}": np.empty(len(rows)) for m in METRICS for e in ("lo", "hi")}
    cols = [*KEYS, "gpu_name", "model_name"]
    for key, idx in rows.groupby(cols).indices.items():
        k = dict(zip(cols, map(str, key), strict=True))
        b = table.lookup({n: k[n] for n in KEYS}, gpu=k["gpu_name"], model=k["model_name"])
        for m in METRICS:
            out[f"{m}_lo"][idx], out[f"{m}_hi"][idx] = b[m].lo, b[m].hi
    return out


def with_band_columns(pred: pd.DataFrame, table: BandTable | None = None) -> pd.DataFrame:
    """Predicted rows (``predict.predict``) with pred_ttft_ms_lo/hi and pred_tpot_ms_lo/hi: the band
    of
    the committed table (``planner.uncertainty.bands.load_bands``) around each prediction (around
    both
    predictions of a row whose regime is open, ``regimes.band_edges``)."""
    keyed = add_band_keys(regimes.with_alternatives(pred))
    keyed["model_name"] = keyed["model_path"].astype(str).map(lambda p: load_model(p).name)
    keyed["gpu_name"] = keyed["system"].astype(str).map(lambda s: get_gpu(s).name)
    b = row_bands(table or load_bands(), keyed.reset_index(drop=True))
    out = pred.copy()
    for m in METRICS:
        out[f"pred_{m}_ms_lo"], out[f"pred_{m}_ms_hi"] = regimes.band_edges(
            *regimes.envelope(keyed, m), b[f"{m}_lo"], b[f"{m}_hi"]
        )
    return out
