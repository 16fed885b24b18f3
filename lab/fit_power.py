"""Fit the power-model parameters (planner/perf/power.py) to measured-power runs and write
planner/calibration/power.yaml.

    python -m lab.fit_power --data ../shared/validation/power/inferencex_power_single_turn.csv \
        --model Qwen/Qwen3.5-397B-A17B [--out planner/calibration/power.yaml]

and the MLPerf rows of a power-limited GPU at full clock and at the clock its limit allows:

    python -m lab.fit_power --mlperf-gpu h100_nvl \
        --data ../shared/validation/e2e/mlperf_v4.1_llm.csv
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
import yaml

from planner.model.bundled import find_bundled
from planner.perf.power import PARAM_BOUNDS, PARAM_NAMES, POWER_FILE, PowerParams
from planner.replay_e2e.power import (
    INITIAL,
    PricedRun,
    fit_params,
    price_run,
    read_runs,
    skip_reason,
)

UNITS = {
    "idle_fraction": "fraction of TDP",
    "busy_fraction": "fraction of TDP",
    "pj_per_flop": "pJ per FLOP",
    "pj_per_byte": "pJ per HBM byte",
}


def fit(data: Path, model: str) -> PowerParams:
    """Parameters fitted on every priced run of ``data``."""
    df = read_runs(data)
    bundled = find_bundled(model)
    runs = []
    for i, row in df.iterrows():
        if skip_reason(row, bundled) is None and bundled is not None:
            priced = price_run(int(str(i)) + 2, row, bundled)
            if isinstance(priced, PricedRun):
                runs.append(priced)
    return fit_params(runs, INITIAL)


def _sig(v: float, hi: float) -> float:
    """``v`` to 4 significant figures; 0 below 1e-6 of its upper bound (a term the fit drops)."""
    return 0.0 if abs(v) < 1e-6 * hi else float(f"{v:.4g}")


def as_yaml(prm: PowerParams, data: Path) -> str:
    """The parameter file: each value with unit, bounds and the command that fitted it."""
    day = datetime.date.today().isoformat()
    doc = {
        "source": f"{prm.source} of {data.name} by `python -m lab.fit_power`, {day}",
        "params": {
            n: {
                "value": _sig(getattr(prm, n), PARAM_BOUNDS[n][1]),
                "unit": UNITS[n],
                "bounds": list(PARAM_BOUNDS[n]),
            }
            for n in PARAM_NAMES
        },
    }
    return yaml.safe_dump(doc, sort_keys=False, width=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, required=True, help="measured-power runs or MLPerf table")
    ap.add_argument("--model", default=None, help="bundled checkpoint the runs served")
    ap.add_argument("--out", type=Path, default=POWER_FILE)
    ap.add_argument(
        "--mlperf-gpu",
        default=None,
        help="instead: --data is an MLPerf table; report this GPU's rows",
    )
    args = ap.parse_args()
    if args.mlperf_gpu is not None:
        rows = mlperf_cap(args.data, args.mlperf_gpu)
        for r in rows:
            print(r)
        for key in ("pred_full_clock", "pred_capped"):
            ratio = [float(r[key]) / float(r["measured_tok_s_per_gpu"]) for r in rows]  # type: ignore[arg-type]
            print(
                f"{key}: median predicted / measured {np.median(ratio):.3g} over {len(rows)} rows"
            )
        return
    if args.model is None:
        ap.error("--model is required to fit")
    text = as_yaml(fit(args.data, args.model), args.data)
    args.out.write_text(text)
    print(text)


def mlperf_cap(data: Path, gpu_key: str) -> list[dict[str, object]]:
    """Offline rows of an MLPerf table on ``gpu_key``: measured output tok/s per accelerator,
    predicted at full clock (as ``planner validate mlperf`` prices it) and at the clock the board
    limit allows at saturation (``planner.perf.power``). Nothing is fitted to these rows."""
    import pandas as pd

    from planner.model.bundled import load_model
    from planner.perf.deployment import Parallelism, WorkerConfig
    from planner.perf.estimate import estimate
    from planner.perf.power import clocked_gpu
    from planner.replay_e2e import mlperf
    from planner.replay_e2e.rows import resolve_gpu, resolve_model
    from planner.replay_e2e.throughput import saturation_tok_s_per_gpu
    from planner.workload.spec import fixed

    out: list[dict[str, object]] = []
    df = pd.read_csv(data)
    for _, row in df.iterrows():
        gpu = resolve_gpu(row["accelerator"])
        if gpu is None or gpu.key != gpu_key or mlperf._reason(row) is not None:
            continue
        if str(row["scenario"]).strip().lower() != "offline":
            continue
        bench = mlperf._benchmark_model(str(row["benchmark"]))
        bundled = resolve_model(mlperf.DATASETS[bench].checkpoint)
        assert bundled is not None
        m = load_model(bundled.key)
        backend, _ = mlperf._backend(row["framework"])
        quant = mlperf._quant(gpu)
        kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
        isl, osl = mlperf._beam_lengths(mlperf.DATASETS[bench])
        best: tuple[float, float, float, int] = (0.0, 0.0, 1.0, 0)
        for tp in mlperf._tp_choices(gpu, float(row["accelerators_per_node"])):
            before = saturation_tok_s_per_gpu(m, gpu, tp, 1, 1, quant, kv, isl, osl, backend)
            if not before > best[0]:
                continue
            worker = WorkerConfig(parallel=Parallelism(tp=tp), weight_quant=quant, kv_dtype=kv)
            wl = fixed(int(isl), int(osl), concurrency=512)
            est = estimate(m, gpu, wl, backend=backend, agg=worker)
            ratio = est.power.clock_ratio if est.power is not None else 1.0
            slow = clocked_gpu(gpu, ratio)
            after = saturation_tok_s_per_gpu(m, slow, tp, 1, 1, quant, kv, isl, osl, backend)
            best = (before, after, ratio, tp)
        out.append(
            {
                "benchmark": row["benchmark"],
                "measured_tok_s_per_gpu": mlperf._measured(row),
                "pred_full_clock": best[0],
                "pred_capped": best[1],
                "clock_ratio": best[2],
                "tp": best[3],
            }
        )
    return out


if __name__ == "__main__":
    main()
