"""Replay measured-power runs (the layout of docs/energy.md "Validation data") through the serving
and power models: per run, the predicted output throughput, average board power per GPU and
energy per output token next to the measured ones; held out by GPU, each GPU's runs are priced
with power parameters fitted on the other GPUs' runs (``fit_params``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from hardware.errors import InfeasibleError, PlannerInputError
from hardware.spec import GpuSpec
from planner.engines.calibration import policy_of
from planner.model.bundled import BundledModel, load_model
from planner.model.spec import ModelSpec
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.perf.power import (
    PARAM_BOUNDS,
    PARAM_NAMES,
    Activity,
    PowerParams,
    board_power_w,
    load_params,
    role_loads,
)
from planner.perf.spec_decode import default_acceptance, draft_cost_ratio
from planner.replay_e2e.rows import resolve_gpu, resolve_model
from planner.workload.spec import LengthSpec, SpecDecode, Workload

COLUMNS: tuple[str, ...] = (
    "hardware",
    "framework",
    "model",
    "precision",
    "specMethod",
    "decodeTp",
    "decodeEp",
    "decodeDpAttn",
    "gpu_count",
    "conc",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "duration_s",
    "source_avg_power_w",
)
"""Columns ``validate power`` reads (docs/energy.md)."""
INITIAL = PowerParams(0.15, 0.2, 0.3, 100.0, "initial guess")
"""Start of every fit (never the packaged values, which saw every GPU's runs)."""
KV_DTYPE = "fp8"
"""ASSUMPTION: the runs keep KV in fp8 (the file records no KV dtype; InferenceX's SGLang
Qwen3.5 launch script passes --kv-cache-dtype fp8_e4m3, lab/inferencemax_recipes.yaml)."""
MTP_DRAFT_LEN = 3
"""ASSUMPTION: an MTP run drafts 3 tokens per step (the file records no draft length). SGLang's
Qwen3.5 recipe runs ``--speculative-algorithm NEXTN --speculative-num-steps 3
--speculative-eagle-topk 1 --speculative-num-draft-tokens 4`` (docs.sglang.io cookbook, Qwen3.5;
the same 3/1/4 is SGLang's ``auto_choose_speculative_params`` default for DeepSeek-V3 in
python/sglang/srt/server_args.py; other architectures get 5 steps, top-4, 8 tokens)."""


@dataclass(frozen=True)
class PricedRun:
    """One run's measured figures and the model's activity and throughput for it."""

    row: int
    """Line of the run in its file (the header is line 1)."""
    gpu: GpuSpec
    gpus: int
    measured_w: float
    measured_tok_s: float
    pred_tok_s: float
    activity: Activity


def read_runs(path: Path) -> pd.DataFrame:
    """The rows of ``path`` (every column of ``COLUMNS`` present)."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise PlannerInputError("--data", f"{path}: {exc}") from exc
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise PlannerInputError("--data", f"{path} lacks columns {', '.join(missing)}")
    return df


def skip_reason(row: pd.Series, model: BundledModel | None) -> str | None:
    """Why a run is not priced, None when it is."""
    if str(row["specMethod"]).strip().lower() not in ("none", "", "nan", "mtp"):
        return "speculative_decoding"
    if str(row["framework"]).strip().lower() != "sglang":
        return "unknown_engine"
    if model is None:
        return "unknown_model"
    if resolve_gpu(row["hardware"]) is None:
        return "unknown_gpu"
    if not float(row["source_avg_power_w"]) > 0 or not float(row["duration_s"]) > 0:
        return "no_measured_power"
    if not int(row["completed"]) > 0 or not float(row["total_output_tokens"]) > 0:
        return "no_completed_requests"
    return None


def spec_of(row: pd.Series, m: ModelSpec, acceptance: float | None = None) -> SpecDecode | None:
    """The speculative decoding an MTP run ran (``MTP_DRAFT_LEN`` tokens; ``acceptance`` per
    position, default the packaged one of the model's family), None for the others."""
    if str(row["specMethod"]).strip().lower() != "mtp":
        return None
    acc, source = default_acceptance("mtp", m.family)
    return SpecDecode(
        method="mtp",
        draft_len=MTP_DRAFT_LEN,
        acceptance=(acceptance,) if acceptance is not None else acc,
        draft_cost_ratio=draft_cost_ratio(m, "mtp"),
        source=source if acceptance is None else "given",
    )


def price_run(
    i: int, row: pd.Series, model: BundledModel, acceptance: float | None = None
) -> PricedRun | str:
    """The serving model's throughput and activity of one run (its recorded TP/EP, clients, mean
    lengths and MTP, ``spec_of``), or the reason it cannot be priced."""
    gpu = resolve_gpu(row["hardware"])
    assert gpu is not None
    m = load_model(model.key)
    tp, ep = int(row["decodeTp"]), int(row["decodeEp"])
    dp = tp if str(row["decodeDpAttn"]).strip().lower() == "true" else 1
    done = int(row["completed"])
    wl = Workload(
        isl=LengthSpec(mean=float(row["total_input_tokens"]) / done),
        osl=LengthSpec(mean=float(row["total_output_tokens"]) / done),
        concurrency=int(row["conc"]),
        bench_requests=max(done, int(row["conc"])),
        spec_decode=spec_of(row, m, acceptance),
    )
    worker = WorkerConfig(
        parallel=Parallelism(tp=tp // dp, dp=dp, ep=ep),
        kv_dtype=KV_DTYPE,
        weight_quant=str(row["precision"]).strip().lower(),  # type: ignore[arg-type]
    )
    gpus = int(row["gpu_count"])
    try:
        est = estimate(m, gpu, wl, backend="sglang", agg=worker)
    except InfeasibleError:
        return "infeasible"
    loads = role_loads(
        m,
        gpu,
        wl,
        worker,
        None,
        policy_of("sglang").calibration,
        est.requests_per_s,
        est.decode_batch,
    )
    return PricedRun(
        row=i,
        gpu=gpu,
        gpus=gpus,
        measured_w=float(row["source_avg_power_w"]),
        measured_tok_s=float(row["total_output_tokens"]) / float(row["duration_s"]),
        pred_tok_s=est.output_tok_s_per_gpu * est.gpus,
        activity=loads[0].activity,
    )


def fit_params(runs: list[PricedRun], start: PowerParams) -> PowerParams:
    """Parameters minimising the squared log error of average power per GPU over ``runs``, each
    in its bounds (``PARAM_BOUNDS``)."""
    lo = [PARAM_BOUNDS[n][0] for n in PARAM_NAMES]
    hi = [PARAM_BOUNDS[n][1] for n in PARAM_NAMES]
    x0 = np.clip([getattr(start, n) for n in PARAM_NAMES], lo, hi)

    def resid(x: np.ndarray) -> np.ndarray:
        prm = start.with_values(dict(zip(PARAM_NAMES, x, strict=True)), start.source)
        return np.array(
            [np.log(float(board_power_w(r.gpu, r.activity, prm)[0]) / r.measured_w) for r in runs]
        )

    fit = least_squares(resid, x0, bounds=(lo, hi))
    gpus = sorted({r.gpu.key for r in runs})
    return start.with_values(
        dict(zip(PARAM_NAMES, fit.x, strict=True)),
        f"fitted on {len(runs)} runs of {', '.join(gpus)}",
    )


def errors(runs: list[PricedRun], prm_of: dict[str, PowerParams]) -> pd.DataFrame:
    """Per run: predicted / measured power per GPU, J per output token and output throughput
    (``prm_of``: the parameters each GPU's runs are priced with)."""
    out = []
    for r in runs:
        w = float(board_power_w(r.gpu, r.activity, prm_of[r.gpu.key])[0])
        j_pred = w * r.gpus / r.pred_tok_s
        j_meas = r.measured_w * r.gpus / r.measured_tok_s
        out.append(
            {
                "row": r.row,
                "gpu": r.gpu.key,
                "measured_w_per_gpu": r.measured_w,
                "pred_w_per_gpu": w,
                "measured_j_per_output_tok": j_meas,
                "pred_j_per_output_tok": j_pred,
                "measured_output_tok_s": r.measured_tok_s,
                "pred_output_tok_s": r.pred_tok_s,
            }
        )
    return pd.DataFrame(out)


def held_out(runs: list[PricedRun]) -> dict[str, PowerParams]:
    """Per GPU, the parameters fitted on the other GPUs' runs (the packaged ones where no other
    GPU has runs)."""
    out = {}
    for g in sorted({r.gpu.key for r in runs}):
        others = [r for r in runs if r.gpu.key != g]
        out[g] = fit_params(others, INITIAL) if others else load_params()
    return out


def replay(
    path: Path, model: str | None, holdout: bool
) -> tuple[pd.DataFrame, dict[str, int], dict[str, PowerParams]]:
    """(per-run errors, skipped runs by reason, parameters each GPU was priced with) of the runs
    of ``path``; ``model``: the checkpoint the runs served where the model column names none in
    the catalog; ``holdout``: each GPU priced with parameters fitted on the other GPUs."""
    df = read_runs(path)
    fallback = resolve_model(model) if model else None
    if model and fallback is None:
        raise PlannerInputError("--model", f"'{model}' is not a bundled checkpoint")
    runs: list[PricedRun] = []
    skipped: dict[str, int] = {}
    for i, row in df.iterrows():
        line = int(str(i)) + 2  # the header is line 1
        bundled = resolve_model(row["model"]) or fallback
        try:
            reason = skip_reason(row, bundled)
            priced = price_run(line, row, bundled) if reason is None and bundled else reason
        except (ValueError, TypeError) as exc:
            raise PlannerInputError("--data", f"{path}:{line}: {exc}") from exc
        if isinstance(priced, PricedRun):
            runs.append(priced)
        else:
            skipped[str(priced)] = skipped.get(str(priced), 0) + 1
    prm_of = held_out(runs) if holdout else {r.gpu.key: load_params() for r in runs}
    return errors(runs, prm_of), skipped, prm_of


def summary(err: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and over all runs: runs, median and p90 absolute error (%) of power per GPU, of J
    per output token and of output throughput."""
    ratios = {
        "power_w": err["pred_w_per_gpu"] / err["measured_w_per_gpu"],
        "j_per_output_tok": err["pred_j_per_output_tok"] / err["measured_j_per_output_tok"],
        "output_tok_s": err["pred_output_tok_s"] / err["measured_output_tok_s"],
    }
    abs_pct = pd.DataFrame({k: (v - 1).abs() * 100 for k, v in ratios.items()})
    abs_pct["gpu"] = err["gpu"]
    rows = []
    for gpu, sub in [*abs_pct.groupby("gpu"), ("all", abs_pct)]:
        row: dict[str, object] = {"gpu": gpu, "runs": len(sub)}
        for k in ratios:
            row[f"{k}_err_p50_pct"] = float(np.median(sub[k]))
            row[f"{k}_err_p90_pct"] = float(np.percentile(sub[k], 90))
        rows.append(row)
    return pd.DataFrame(rows)
