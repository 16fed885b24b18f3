"""Synthetic benchmark results in the engines' native formats, in benchmark.sh's folder layout.

The "measurements" are the serving model's own predictions under engine constants shifted from
the packaged ones, so a calibration must recover the shifted constants.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd

from planner.calibration.data import deployment_columns, named_run
from planner.calibration.profile import (
    BOUNDS,
    FORMAT,
    RULE,
    EngineProfile,
    Fit,
    Profile,
    Residuals,
    prepared,
    profile_text,
    with_constants,
)
from planner.engines.calibration import load_engines
from planner.perf.deployment import Deployment
from planner.replay_e2e.predict import predict
from planner.uncertainty.profile_bands import ModeBands
from tests.planner.emitters.plans import default_agg_plan

POINTS = [(isl, c) for isl in (1000, 4000) for c in (1, 4, 16, 64)]
OSL = 500
SHIFT = {
    "kernel_scale": 1.3,
    "step_overhead_s": 1.4,
    "request_overhead_s": 1.5,
    "burst_fraction": 0.6,
}
"""Factor applied to each packaged constant (every one shifted by >= 30 %)."""
NAMED_RUN_SHARES = ("burst_fraction",)
"""Shifted but without effect on the native results: each names its run (``num_prompts`` or
``completed``), whose lockstep share N/P is then known, so the fit keeps them packaged."""


def small_plan() -> dict[str, Any]:
    """Llama-3.1-8B on one H100 (TP 1, one worker, 256 sequences), closed loop of 16 clients."""
    plan = default_agg_plan()
    plan.update(model="llama-3.1-8b-instruct", gpu="h100_sxm")
    plan["workload"] = {"isl": 1000, "osl": OSL, "concurrency": 16, "rate": None}
    dep = plan["best"]["deployment"]
    dep.update(
        model="llama-3.1-8b-instruct",
        hf_id="meta-llama/Llama-3.1-8B-Instruct",
        gpu="h100_sxm",
        max_model_len=8192,
    )
    dep["agg"] = {
        **copy.deepcopy(dep["agg"]),
        "parallel": {"tp": 1},
        "workers": 1,
        "max_num_seqs": 256,
    }
    plan["best"]["gpus"] = 1
    return plan


def shifted_constants(backend: str) -> dict[str, float]:
    base = load_engines()[backend]
    return {k: float(getattr(base, k).value) * f for k, f in SHIFT.items()}


def synthetic_measurements(dep: Deployment, backend: str) -> pd.DataFrame:
    """Predicted TTFT/TPOT (ms) of every point of ``POINTS`` under the shifted constants, each
    point priced as the benchmark run its native result names (``native_result``: request count
    and lengths, read by ``calibration_data.named_run`` as ``calibrate e2e`` reads them)."""
    recs = [
        {
            "id": f"{isl}-{c}",
            "silicon_data_source": f"synthetic; silicon_concurrency={c}",
            "backend": backend,
            "model_path": dep.model,
            "system": dep.gpu,
            "mode": dep.mode,
            "isl": isl,
            "osl": OSL,
            **deployment_columns(dep, c),
            **named_run("synthetic", native_result(backend, dep.hf_id, isl, c, 1.0, 1.0), c),
            "silicon_ttft_ms": 1.0,
            "silicon_tpot_ms": 1.0,
        }
        for isl, c in POINTS
    ]
    rows, _ = prepared(pd.DataFrame(recs))
    cal = with_constants(load_engines()[backend], shifted_constants(backend), "shifted")
    return predict(rows, progress=False, overrides={backend: cal})


def native_result(
    backend: str, model_id: str, isl: int, conc: int, ttft: float, tpot: float
) -> dict[str, Any]:
    """One run's result as the engine's load generator writes it (the fields we read, and the
    ones around them)."""
    n = 5 * conc
    common = {
        "duration": 100.0,
        "completed": n,
        "total_input_tokens": n * isl,
        "total_output_tokens": n * OSL,
        "request_throughput": n / 100.0,
        "mean_ttft_ms": ttft,
        "median_ttft_ms": ttft,
        "p99_ttft_ms": 1.5 * ttft,
        "mean_tpot_ms": tpot,
        "median_tpot_ms": tpot,
        "p99_tpot_ms": 1.2 * tpot,
        "max_concurrency": conc,
    }
    if backend == "sglang":
        return {
            "backend": "sglang",
            "dataset_name": "random",
            "request_rate": float("inf"),
            "random_input_len": isl,
            "random_output_len": OSL,
            "random_range_ratio": 1.0,
            **common,
            "concurrency": float(conc),
        }
    return {
        "date": "20261130-120000",
        "backend": "vllm",
        "label": None,
        "model_id": model_id,
        "tokenizer_id": model_id,
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        **common,
        "failed": 0,
    }


def write_results(bundle: Path, backend: str) -> pd.DataFrame:
    """``results/run-<i>/`` folders as benchmark.sh leaves them: a copy of the bundle's
    deployment.json and client0.json (vLLM) or client0.jsonl (SGLang; the last run's file holds
    two appended runs). Returns the synthetic measurements."""
    sidecar = (bundle / "deployment.json").read_text()
    dep = Deployment.model_validate(json.loads(sidecar)["deployment"])
    meas = synthetic_measurements(dep, backend)
    lines: list[str] = []
    for i, row in meas.iterrows():
        run = bundle / "results" / f"run-20261130T12{i:02d}00Z"
        run.mkdir(parents=True, exist_ok=True)
        (run / "deployment.json").write_text(sidecar)
        res = native_result(
            backend,
            dep.hf_id,
            int(row["isl"]),
            int(row["c_concurrency"]),
            float(row["pred_ttft_ms"]),
            float(row["pred_tpot_ms"]),
        )
        lines.append(json.dumps(res))
        if backend == "sglang":
            keep = 2 if i == len(meas) - 1 else 1
            (run / "client0.jsonl").write_text("\n".join(lines[-keep:]) + "\n")
            if keep == 2:
                (bundle / "results" / f"run-20261130T12{i - 1:02d}00Z" / "client0.jsonl").unlink()
        else:
            (run / "client0.json").write_text(json.dumps(res, indent=2))
    return meas


def write_profile(
    path: Path,
    backend: str,
    factors: dict[str, float],
    own_bands: dict[str, ModeBands] | None = None,
) -> Path:
    """A profile (as ``calibrate e2e`` writes it) whose constants are the packaged ones times
    ``factors``, fitted from nothing, with ``own_bands`` as its bands: for tests of
    ``--calibration`` itself."""
    base = load_engines()[backend]
    consts = {k: float(getattr(base, k).value) * factors.get(k, 1.0) for k in BOUNDS}
    none = Residuals()
    fit = Fit(
        gpus=["h100_sxm"],
        rows_used=1,
        load_points=1,
        fitted=sorted(factors),
        kept_packaged=[k for k in BOUNDS if k not in factors],
        constants=consts,
        residuals_before=none,
        residuals_after=none,
    )
    prof = Profile(
        format=FORMAT,
        created_utc="2026-11-30T12:00:00Z",
        rule=RULE,
        data={},
        engines={backend: EngineProfile(all_gpus=fit, own_bands=own_bands or {})},
    )
    path.write_text(profile_text(prof))
    return path
