"""Held-out validation: the figure a user meets on a set-up, or a GPU, the fit never saw.

Two fold schemes. By GPU (``gpu_folds``): each GPU of the rows (the ``system`` column, a GPU key)
is one fold, its rows priced with constants fitted on the other GPUs' rows only, the figure of a
GPU without measurements of its own. By campaign (``campaign_folds``): a campaign is a row's
``campaign`` column (one benchmark dump or run of the source data; the layout, ``layout``);
campaigns are sorted by name and dealt round-robin to K folds, never split. Either way each fold is
priced with every fitted engine constant refitted on the other folds by ``fit.fit_constants``, the
code that produced the shipped values. Folds run in parallel processes.

    from planner.replay_e2e.holdout import campaign_folds, fold_predictions
    folds = campaign_folds(rows, 5)            # fold index per row
    pred, constants = fold_predictions(rows, folds, 0)
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.replay_e2e.fit import Overrides, Values, fit_constants
from planner.replay_e2e.predict import predict, with_constants

MAX_FOLDS = 50
CAMPAIGN = "campaign"


def campaigns(rows: pd.DataFrame) -> pd.Series:
    """Each row's measurement campaign (the ``campaign`` column; an input error without it)."""
    if CAMPAIGN not in rows:
        raise PlannerInputError(
            "--holdout", "campaign needs a 'campaign' column (python -m lab.prepare_e2e fills it)"
        )
    return rows[CAMPAIGN].astype(str)


def campaign_folds(rows: pd.DataFrame, k: int) -> np.ndarray:
    """Fold index (0..k-1) of every row: campaigns sorted by name, dealt round-robin."""
    if not 2 <= k <= MAX_FOLDS:
        raise PlannerInputError("--folds", f"{k} not in [2, {MAX_FOLDS}]")
    camp = campaigns(rows)
    fold_of = {name: i % k for i, name in enumerate(sorted(set(camp)))}
    return camp.map(fold_of).to_numpy(dtype=int)


def gpus(rows: pd.DataFrame) -> pd.Series:
    """Each row's GPU: the catalog key its ``system`` column names (aliases of one GPU agree)."""
    keys = {s: get_gpu(s).key for s in rows["system"].astype(str).unique()}
    return rows["system"].astype(str).map(keys)


def gpu_folds(rows: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """(fold index of every row, the GPU of each fold): one fold per GPU, GPUs sorted by key; an
    input error with fewer than two GPUs (nothing to fit the held-out one on)."""
    gpu = gpus(rows)
    names = sorted(set(gpu))
    if len(names) < 2:
        raise PlannerInputError(
            "--holdout",
            f"gpu needs rows of at least two GPUs, got {names} (give --data more than once)",
        )
    return gpu.map({g: i for i, g in enumerate(names)}).to_numpy(dtype=int), names


def fold_predictions(
    rows: pd.DataFrame, folds: np.ndarray, fold: int, overrides: Overrides = None
) -> tuple[pd.DataFrame, Values]:
    """Rows of ``fold`` priced with the constants fitted on the other folds, and those constants
    (``overrides``: engines' constants replacing the packaged ones, a profile's)."""
    values = fit_constants(rows[folds != fold].reset_index(drop=True), overrides=overrides)
    test = rows[folds == fold]
    pred = predict(with_constants(test, values), progress=False, overrides=overrides)
    return pred.set_index(test.index), values


def _workers(k: int) -> int:
    return max(
        1,
        min(
            k,
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1,
        ),
    )


def all_folds(
    rows: pd.DataFrame, folds: np.ndarray, scheme: str, progress: bool, overrides: Overrides
) -> tuple[pd.DataFrame, list[Values]]:
    """Held-out predictions of every row (each fold priced by ``fold_predictions``, folds in
    parallel processes), in row order, and each fold's constants."""
    k = int(folds.max()) + 1 if len(folds) else 0
    parts: list[pd.DataFrame] = []
    constants: list[Values] = []
    with ProcessPoolExecutor(max_workers=_workers(k)) as pool:
        futures = [pool.submit(fold_predictions, rows, folds, f, overrides) for f in range(k)]
        for f, fut in enumerate(futures):
            pred, values = fut.result()
            parts.append(pred)
            constants.append(values)
            if progress:
                sys.stderr.write(f"\rvalidate e2e --holdout {scheme}: fold {f + 1}/{k}")
    if progress:
        sys.stderr.write("\n")
    return pd.concat(parts).sort_index(), constants


def campaign_holdout(
    rows: pd.DataFrame, k: int = 5, progress: bool = True, overrides: Overrides = None
) -> tuple[pd.DataFrame, dict[str, object]]:
    """Held-out predictions of every prepared row (``candidates.prepare``) and the report's
    ``holdout`` part."""
    folds = campaign_folds(rows, k)
    pred, constants = all_folds(rows, folds, "campaign", progress, overrides)
    camp = campaigns(rows)
    info = {
        "scheme": "campaign",
        "folds": k,
        "campaigns": int(camp.nunique()),
        "fold_rows": [int((folds == f).sum()) for f in range(k)],
        "fold_campaigns": [int(camp[folds == f].nunique()) for f in range(k)],
        "fold_constants": constants,
    }
    return pred, {"holdout": info}


def gpu_holdout(
    rows: pd.DataFrame, progress: bool = True, overrides: Overrides = None
) -> tuple[pd.DataFrame, dict[str, object]]:
    """Every prepared row priced with constants fitted on the other GPUs' rows (``gpu_folds``),
    and the report's ``holdout`` part (the GPU of each fold, its rows and constants)."""
    folds, names = gpu_folds(rows)
    pred, constants = all_folds(rows, folds, "gpu", progress, overrides)
    info = {
        "scheme": "gpu",
        "folds": len(names),
        "fold_gpus": names,
        "fold_rows": [int((folds == f).sum()) for f in range(len(names))],
        "fold_constants": constants,
    }
    return pred, {"holdout": info}
