"""Fit the per-engine constants of ``planner/calibration/engines.yaml`` to measured rows.

    python -m planner.validation.fit_engines ../shared/validation/e2e/silicon_measured.csv vllm

Seven physically meaningful constants per engine: CPU time per step not hidden behind the GPU
(``step_overhead_s``) and its part per running request (``seq_overhead_s``), achieved / priced kernel
time (``kernel_scale``), per-request time outside the steps in aggregated and in disaggregated
deployments (``request_overhead_s``, ``disagg_request_overhead_s``) and the share of a closed loop's clients that arrive in lockstep
in aggregated and in disaggregated deployments (``burst_fraction``, ``disagg_burst_fraction``: the unrecorded benchmark
protocols of the two sets of measurement campaigns). Coordinate search over a grid of each (two sweeps), minimising the median
|log(pred/measured)| of TTFT plus TPOT. Held-out split: rows are split by (model, system) group —
groups with an even index in sorted order train, the others test — so repeated runs of one
deployment never sit on both sides; the test error is printed next to the training error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from planner.engine_calibration import EngineCalibration, Sourced, engine, load_engines
from planner.validation.e2e import error_stats, predict, prepare, read_measurements

GRID: dict[str, tuple[float, ...]] = {
    "kernel_scale": (0.8, 0.9, 1.0, 1.1, 1.2),
    "step_overhead_s": (0.0, 0.001, 0.002, 0.003, 0.004, 0.006),
    "seq_overhead_s": (0.0, 1e-5, 2e-5, 3e-5, 5e-5),
    "request_overhead_s": (0.0, 0.01, 0.03, 0.06, 0.08, 0.1, 0.15, 0.2),
    "disagg_request_overhead_s": (0.03, 0.06, 0.1, 0.13, 0.16, 0.2),
    "burst_fraction": (0.0, 0.1, 0.15, 0.2, 0.25, 1.0 / 3.0, 0.5, 1.0),
    "disagg_burst_fraction": (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 1.0),
}
"""Candidate values per constant (ranges: kernel efficiency spread of published engines; 0-5 ms of
CPU per step; 0-50 us of CPU per running request per step; 0-200 ms of HTTP/tokenization/admission (aggregated) and
of that plus the router hop and KV-transfer set-up (disaggregated); lockstep share 1/W for runs of W = 1..10 waves
of N requests, and 0)."""
SWEEPS = 2


def split_groups(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test): alternate (model, system) groups in sorted order."""
    keys = sorted(set(zip(rows["model_path"], rows["system"], strict=True)))
    train_keys = set(keys[::2])
    mask = np.array([(m, s) in train_keys for m, s in zip(rows["model_path"], rows["system"], strict=True)])
    return rows[mask].reset_index(drop=True), rows[~mask].reset_index(drop=True)


def with_values(base: EngineCalibration, values: dict[str, float], source: str) -> EngineCalibration:
    """``base`` with ``values`` replaced, each tagged ``source``."""
    return base.model_copy(update={k: Sourced(value=v, source=source) for k, v in values.items()})


def loss(rows: pd.DataFrame, backend: str, cal: EngineCalibration) -> float:
    """median |log error| of TTFT + that of TPOT (unmodelled rows count as a large error)."""
    pred = predict(rows, progress=False, overrides={backend: cal})
    ttft = np.log(pred["pred_ttft_ms"] / pred["silicon_ttft_ms"]).abs()
    tpot = np.log(pred["pred_tpot_ms"] / pred["silicon_tpot_ms"]).abs()
    return float(np.nanmedian(ttft.replace(np.inf, 5.0)) + np.nanmedian(tpot.replace(np.inf, 5.0)))


def fit_rows(rows: pd.DataFrame, backend: str) -> dict[str, float]:
    """Coordinate search of the constants of ``GRID`` on ``rows``."""
    base = engine(backend)
    values = {k: float(getattr(base, k).value) for k in GRID}
    for _ in range(SWEEPS):
        for name, grid in GRID.items():
            scores = [loss(rows, backend, with_values(base, {**values, name: v}, "fit")) for v in grid]
            values[name] = grid[int(np.argmin(scores))]
    return values


def report(rows: pd.DataFrame, backend: str, cal: EngineCalibration) -> dict[str, object]:
    """Errors per mode of ``rows`` under ``cal``."""
    pred = predict(rows, progress=False, overrides={backend: cal})
    out: dict[str, object] = {"rows": len(pred)}
    for mode, sub in pred.groupby("mode"):
        out[f"{mode}_ttft"] = error_stats(sub["pred_ttft_ms"].to_numpy(float), sub["silicon_ttft_ms"].to_numpy(float))["median_ape_pct"]
        out[f"{mode}_tpot"] = error_stats(sub["pred_tpot_ms"].to_numpy(float), sub["silicon_tpot_ms"].to_numpy(float))["median_ape_pct"]
    return out


def fit(path: Path, backend: str) -> dict[str, object]:
    """Fit on the training groups, report train and held-out errors; then fit on all rows."""
    rows = prepare(read_measurements(Path(path)).query("backend == @backend")).rows
    train, test = split_groups(rows)
    split_values = fit_rows(train, backend)
    split_cal = with_values(engine(backend), split_values, "split fit")
    full_values = fit_rows(rows, backend)
    return {"backend": backend, "split_fit": split_values, "train": report(train, backend, split_cal),
            "held_out": report(test, backend, split_cal), "full_fit": full_values}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m planner.validation.fit_engines", description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="CSV in the layout of silicon_measured.csv")
    ap.add_argument("backend", choices=tuple(load_engines()), help="engine whose constants to fit")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        sys.stderr.write(f"error: data: {args.data} does not exist\n")
        return 2
    print(json.dumps(fit(args.data, args.backend), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
