"""``planner validate e2e``: replay measured deployments (``layout``) through the serving model,
in sample (the shipped engine constants) or held out by GPU or by campaign (constants refitted on
the other GPUs' or campaigns' rows, ``holdout``), with the committed bands around every prediction
(``bands``)."""

from __future__ import annotations

from pathlib import Path

from hardware.errors import PlannerInputError
from planner.engines.calibration import EngineCalibration
from planner.replay_e2e.bands import gpu_fold_bands, quantile_calibration, with_band_columns
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.holdout import campaign_holdout, gpu_folds, gpu_holdout
from planner.replay_e2e.layout import Paths, read_rows_counted
from planner.replay_e2e.predict import CONST_PREFIX, predict
from planner.replay_e2e.stats import modelled, off_by_factor, summarize
from planner.uncertainty.bands import load_bands

HOLDOUTS = ("gpu", "campaign", "none")


def validate_e2e(
    path: Paths,
    predictions_out: Path | None = None,
    progress: bool = True,
    holdout: str = "none",
    folds: int = 5,
    overrides: dict[str, EngineCalibration] | None = None,
) -> dict[str, object]:
    """The ``planner validate e2e`` report of the rows of ``path`` (one file or several,
    concatenated): in-sample (``holdout`` "none": the shipped constants), or held out ("gpu":
    each GPU's rows priced with constants refitted on the other GPUs' rows and banded by a table
    fitted on the other GPUs' held-out residuals, ``bands.gpu_fold_bands``; "campaign": each fold
    of measurement campaigns priced with constants refitted on the other folds;
    ``planner.replay_e2e.holdout``), in the same shape plus ``holdout``; ``overrides``: engine
    constants replacing the packaged ones (a profile's)."""
    if holdout not in HOLDOUTS:
        raise PlannerInputError("--holdout", f"'{holdout}' not one of {sorted(HOLDOUTS)}")
    df, duplicates, layouts = read_rows_counted(path)
    prep = prepare(df)
    head = {
        "rows": int(len(df) + duplicates),
        "duplicates_dropped": duplicates,
        **{f"layout_read_from_{k}": v for k, v in layouts.items()},
    }
    extra: dict[str, object] = {}
    if holdout == "none":
        pred = predict(prep.rows, progress, overrides)
    elif holdout == "gpu":
        pred, extra = gpu_holdout(prep.rows, progress, overrides)
    else:
        pred, extra = campaign_holdout(prep.rows, folds, progress, overrides)
    if holdout == "gpu":  # the band table refitted per fold, as the constants were
        pred = gpu_fold_bands(pred, gpu_folds(pred)[0], load_bands().level)
    elif not pred.empty:  # the committed bands (planner.uncertainty.bands) around every prediction
        pred = with_band_columns(pred)
    good, skipped = modelled(pred, prep.skipped)
    if holdout == "gpu":
        extra["quantile_calibration"] = quantile_calibration(good)
    if predictions_out is not None:
        pred.drop(columns=[c for c in pred.columns if c.startswith(CONST_PREFIX)]).to_csv(
            predictions_out, index=False
        )
    return {
        **head,
        "modelled": int(len(good)),
        "skipped": skipped,
        "groups": summarize(good),
        "off_by_3x": off_by_factor(good),
        **extra,
    }
