"""Fit the per-engine constants of ``planner/calibration/engines.yaml`` to measured rows.

    python -m planner.validation.fit_engines ../shared/validation/e2e/silicon_measured.csv vllm

Four constants per engine (step overhead, kernel scale, per-request overhead, burst fraction),
fitted by Nelder-Mead on the median |log(pred/measured)| of TTFT plus TPOT over the even-numbered
rows of that engine; the odd rows are held out and their error is printed (the split report).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from planner.engine_calibration import EngineCalibration, Sourced, engine
from planner.validation.e2e import error_stats, predict, prepare

FIT_MAX_EVALS = 40
PARAMS: tuple[str, ...] = ("step_overhead_s", "kernel_scale", "request_overhead_s", "burst_fraction")


def _calibration(base: EngineCalibration, x: np.ndarray) -> EngineCalibration:
    vals = {"step_overhead_s": abs(x[0]) * 1e-3, "kernel_scale": abs(x[1]), "request_overhead_s": abs(x[2]) * 1e-3, "burst_fraction": float(np.clip(x[3], 0, 1))}
    return base.model_copy(update={k: Sourced(value=v, source="fit") for k, v in vals.items()})


def _loss(rows: pd.DataFrame, backend: str, cal: EngineCalibration) -> float:
    pred = predict(rows, progress=False, overrides={backend: cal})
    ttft = np.log(pred["pred_ttft_ms"] / pred["silicon_ttft_ms"]).abs()
    tpot = np.log(pred["pred_tpot_ms"] / pred["silicon_tpot_ms"]).abs()
    return float(np.nanmedian(ttft.replace(np.inf, 5.0)) + np.nanmedian(tpot.replace(np.inf, 5.0)))


def fit(path: Path, backend: str) -> tuple[EngineCalibration, dict[str, object]]:
    """Fitted calibration of ``backend`` and the held-out error report."""
    df = pd.read_csv(path)
    rows = prepare(df[df["backend"] == backend]).rows
    train, test = rows.iloc[::2].reset_index(drop=True), rows.iloc[1::2].reset_index(drop=True)
    base = engine(backend)
    x0 = np.array([base.step_overhead_s.value * 1e3, base.kernel_scale.value, base.request_overhead_s.value * 1e3, base.burst_fraction.value])
    best = minimize(lambda x: _loss(train, backend, _calibration(base, x)), x0, method="Nelder-Mead", options={"maxfev": FIT_MAX_EVALS, "initial_simplex": None})
    cal = _calibration(base, best.x)
    pred = predict(test, progress=False, overrides={backend: cal})
    report: dict[str, object] = {"backend": backend, "train_rows": len(train), "test_rows": len(test)}
    for mode, sub in pred.groupby("mode"):
        report[f"{mode}_ttft"] = error_stats(sub["pred_ttft_ms"].to_numpy(float), sub["silicon_ttft_ms"].to_numpy(float))
        report[f"{mode}_tpot"] = error_stats(sub["pred_tpot_ms"].to_numpy(float), sub["silicon_tpot_ms"].to_numpy(float))
    return cal, report


if __name__ == "__main__":
    c, r = fit(Path(sys.argv[1]), sys.argv[2])
    print({p: getattr(c, p).value for p in PARAMS})
    print(r)
