"""Static-batch measurements: Splitwise prompt / token times and the blog reports' latency tests.

Both tables time a fixed batch run alone (no arrivals, no queueing), so they are priced as single
steps of the step model with the engine's calibration (``price_step``): one prefill step of
``batch`` prompts, then decode steps of ``batch`` sequences at the mean context (prompt + half the
output). Splitwise (``splitwise_perf_model.csv``): ``prompt_time`` = the prefill step,
``token_time`` = one decode step, in ms. Blog reports (``blog_reports.csv``): rows of a fixed-batch
latency test with recorded lengths, batch and TP: end-to-end latency = prefill + (osl - 1) decode
steps.

Rows that are not comparable are counted by reason: lengths, batch or parallelism not recorded (the
ShareGPT throughput runs, the DeepSeek large-scale expert-parallel deployments), GPU variant not
stated, power-capped hardware (the spec peaks assume full power), Splitwise batch-64 rows (flagged
inconsistent in the shared data notes), and models without a bundled config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from planner.engines.calibration import engine
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, parallel_arrays
from planner.perf.opgraph import StepMix
from planner.perf.pricer import default_pricer
from planner.perf.step import price_step
from planner.replay_e2e.rows import (
    count,
    grouped,
    resolve_gpu,
    resolve_model,
    unresolved_model_reason,
)

SPLITWISE_BACKEND = "vllm"
"""Splitwise's profiles were taken with vLLM in fp16 (Patel et al., 'Splitwise: Efficient Generative
LLM Inference Using Phase Splitting', ISCA 2024, characterization section)."""
SPLITWISE_INCONSISTENT_BATCH = 64
"""Batch size whose rows the shared data notes flag as inconsistent (validation/README.md)."""


def step_times(
    m: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    batch: float,
    isl: float,
    osl: float,
    backend: str,
    quant: str = "bf16",
) -> tuple[float, float]:
    """(prefill step s, decode step s) of a static batch: ``batch`` prompts of ``isl`` tokens in one
    step, then ``batch`` sequences decoding at context isl + osl/2."""
    kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
    one = np.array([1.0])
    par = parallel_arrays(
        gpu, one * tp, one, one, one, one * WEIGHT_QUANTS.index(quant), one * KV_DTYPES.index(kv)
    )
    z = np.zeros(1)
    pre = StepMix(z, z, one * batch * isl, one * isl, z)
    dec = StepMix(one * batch, one * (isl + osl / 2.0), z, z, z)
    kw = engine(backend).step_kwargs()
    pricer = default_pricer(gpu)
    return (
        float(price_step(m, par, pre, pricer, **kw).time_s[0]),
        float(price_step(m, par, dec, pricer, **kw).time_s[0]),
    )


def _splitwise_reason(row: pd.Series) -> str | None:
    if "pcap" in str(row["hardware"]).lower():
        return "power_capped"
    if int(row["batch_size"]) == SPLITWISE_INCONSISTENT_BATCH:
        return "flagged_inconsistent_batch_64"
    if resolve_model(row["model"]) is None:
        return unresolved_model_reason(row["model"])
    if resolve_gpu(row["hardware"]) is None:
        return "unknown_gpu"
    return None


def validate_splitwise(path: Path) -> dict[str, object]:
    """Predicted vs measured Splitwise prompt and token times (one group per metric)."""
    df = _read(
        path,
        (
            "model",
            "hardware",
            "prompt_size",
            "batch_size",
            "token_size",
            "prompt_time",
            "token_time",
            "tensor_parallel",
        ),
    )
    skipped: dict[str, int] = {}
    preds = []
    for _, row in df.iterrows():
        reason = _splitwise_reason(row)
        if reason:
            count(skipped, reason)
            continue
        gpu, bundled = resolve_gpu(row["hardware"]), resolve_model(row["model"])
        assert gpu is not None and bundled is not None
        pre, dec = step_times(
            load_model(bundled.key),
            gpu,
            int(row["tensor_parallel"]),
            float(row["batch_size"]),
            float(row["prompt_size"]),
            float(row["token_size"]),
            SPLITWISE_BACKEND,
        )
        for metric, pred in (("prompt_time_ms", pre), ("token_time_ms", dec)):
            preds.append(
                {
                    "metric": metric,
                    "gpu_key": gpu.key,
                    "model": bundled.key,
                    "value": float(row[metric.removesuffix("_ms")]),
                    "pred_value": pred * 1e3,
                }
            )
    out = pd.DataFrame(preds)
    return {
        "rows": int(len(df)),
        "modelled": int(len(out) // 2),
        "skipped": skipped,
        "groups": grouped(out, ("metric", "gpu_key", "model"), metric="time"),
    }


def _blog_reason(row: pd.Series) -> str | None:
    if not str(row["metric"]).startswith("e2e_latency"):
        return "metric_not_a_static_batch_latency"
    if not (str(row["isl"]).isdigit() and str(row["osl"]).isdigit()):
        return "lengths_not_recorded"
    if not (pd.notna(row["batch_size"]) and pd.notna(row["tp"])):
        return "batch_or_parallelism_not_recorded"
    if resolve_model(row["model"]) is None:
        return unresolved_model_reason(row["model"])
    if resolve_gpu(row["gpu"]) is None:
        return "gpu_variant_not_stated_or_unknown"
    return None


def validate_blogs(path: Path) -> dict[str, object]:
    """Predicted vs measured end-to-end latency of the blog reports' fixed-batch latency tests."""
    df = _read(
        path, ("framework", "model", "gpu", "tp", "isl", "osl", "batch_size", "metric", "value")
    )
    skipped: dict[str, int] = {}
    preds = []
    for _, row in df.iterrows():
        reason = _blog_reason(row)
        if reason:
            count(skipped, reason)
            continue
        gpu, bundled = resolve_gpu(row["gpu"]), resolve_model(row["model"])
        assert gpu is not None and bundled is not None
        backend = "vllm" if "vllm" in str(row["framework"]).lower() else "sglang"
        isl, osl = float(row["isl"]), float(row["osl"])
        pre, dec = step_times(
            load_model(bundled.key),
            gpu,
            int(row["tp"]),
            float(row["batch_size"]),
            isl,
            osl,
            backend,
        )
        preds.append(
            {
                "metric": row["metric"],
                "gpu_key": gpu.key,
                "model": bundled.key,
                "value": float(row["value"]),
                "pred_value": (pre + (osl - 1.0) * dec) * 1e3,
            }
        )
    out = pd.DataFrame(preds)
    return {
        "rows": int(len(df)),
        "modelled": int(len(out)),
        "skipped": skipped,
        "groups": grouped(out, ("gpu_key", "model"), metric="latency"),
    }


def _read(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    if not path.is_file():
        raise PlannerInputError("--data", f"{path} does not exist")
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise PlannerInputError("--data", f"{path}: missing columns {', '.join(missing)}")
    return df


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.static_batch splitwise|blogs --data CSV [--format json]``."""
    from planner.cli.cmd_validate_data import print_report

    ap = argparse.ArgumentParser(
        prog="python -m lab.static_batch", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("table", choices=("splitwise", "blogs"))
    ap.add_argument("--data", type=Path, required=True, help="the table (CSV)")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args(argv)
    run = validate_splitwise if args.table == "splitwise" else validate_blogs
    try:
        report = run(args.data)
    except PlannerInputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    return print_report(report, args.format)


if __name__ == "__main__":
    raise SystemExit(main())
