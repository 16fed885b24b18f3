"""Replay TensorRT-LLM max-throughput rows (``trtllm_perf_overview.csv``): predicted saturation
output tokens/s (all requests queued: the engine holds as many as max batch and KV allow) vs
measured.

Rows kept: ``max-throughput`` load, metric ``output_tok_s_total`` or ``output_tok_s_per_gpu``,
framework v0.14 and newer (the version is read wherever it is written; none -> ``unknown_version``).
Models resolve through the model catalog, GPUs through the hardware catalog's aliases
(``planner.replay_e2e.rows``); others are counted under a skip reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from hardware.input_files import numeric_columns, read_csv, require_columns
from hardware.spec import GpuSpec
from planner.engines.calibration import engine
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, CandidateArrays, evaluate_batch
from planner.replay_e2e.rows import (
    count,
    grouped,
    parse_version,
    resolve_gpu,
    resolve_model,
    unresolved_model_reason,
)
from planner.workload.spec import fixed

MIN_VERSION = (0, 14)
NOT_IN_SCOPE = ("older_than_v0.14", "not_max_throughput", "other_metric")
"""Skip reasons of rows outside the validator's scope; ``in_scope`` counts the others
(max-throughput rows from v0.14 on, plus rows whose version cannot be read)."""
SATURATION_CLIENTS = 4096.0
"""Clients of the closed loop that stands for 'all requests queued at once' (capped by capacity)."""
BENCH_MEMORY_UTILIZATION = 0.95
"""trtllm-bench's kv_cache_gpu_mem_fraction default (tensorrt_llm/bench/build/tuning.py)."""
BENCH_MAX_BATCH = 4096.0
"""trtllm-bench caps the engine's max batch size at 4096 / pp (tensorrt_llm/bench/build/tuning.py,
``finetune_setting``: "Cap total batch size to avoid decoder buffer size becoming too large")."""
BENCH_MAX_TOKENS = 32768.0
"""trtllm-bench caps max_num_tokens at 32768 (same function: TRT activation buffer)."""
BENCH_MIN_TOKENS = 2048.0
"""trtllm-bench's floor on max_num_tokens ("ensure Ctx/Gen overlap efficiency")."""


def bench_engine_settings(
    kv_requests: np.ndarray, isl: float, osl: float, pp: float
) -> tuple[np.ndarray, np.ndarray]:
    """(max_batch_size, max_num_tokens) trtllm-bench builds for a dataset of fixed ISL/OSL:
    batch = KV-capacity requests (ISL + OSL each) capped at 4096/pp, tokens = batch·(1 + ISL/OSL)
    within [2048, 32768] (tensorrt_llm/bench/build/tuning.py ``finetune_setting``; its upward
    rounding to multiples of 32-1024 is left out: the batch is KV-bound either way)."""
    batch = np.minimum(kv_requests, BENCH_MAX_BATCH) / pp
    tokens = np.clip(batch * (1.0 + isl / osl), BENCH_MIN_TOKENS, BENCH_MAX_TOKENS)
    return np.maximum(batch, 1.0), tokens


def _reason(row: pd.Series) -> str | None:
    """Why a row is not modelled (None: it is). Versions are parsed wherever they are written."""
    if any(pd.isna(row[c]) for c in ("isl", "osl", "value")):
        return "incomplete_row"
    ver = parse_version(row["framework_version"])
    if ver is None:
        return "unknown_version"
    if ver[:2] < MIN_VERSION:
        return "older_than_v0.14"
    if not str(row["concurrency_or_rate"]).startswith("max-throughput"):
        return "not_max_throughput"
    if row["metric"] not in ("output_tok_s_total", "output_tok_s_per_gpu"):
        return "other_metric"
    if resolve_model(row["model"]) is None:
        return unresolved_model_reason(row["model"])
    if resolve_gpu(row["gpu"]) is None:
        return "unknown_gpu"
    return None


def saturation_tok_s_per_gpu(
    m: ModelSpec,
    gpu: GpuSpec,
    tp: float,
    pp: float,
    ep: float,
    quant: str,
    kv: str,
    isl: float,
    osl: float,
    backend: str = "trtllm",
) -> float:
    """Output tokens/s per GPU with all requests queued at once: the engine runs at the batch its KV
    capacity allows (``bench_engine_settings``); NaN when the model does not fit."""
    eng = engine(backend)
    cols = {
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "weight_quant": WEIGHT_QUANTS.index(quant),
        "kv_dtype": KV_DTYPES.index(kv),
        "concurrency": SATURATION_CLIENTS,
    }
    w = fixed(int(round(isl)), int(round(osl)), concurrency=1)
    c = CandidateArrays.from_lists(
        **cols,
        max_num_seqs=eng.max_num_seqs.value,
        max_num_batched_tokens=eng.max_num_batched_tokens.value,
    )
    r = evaluate_batch(
        m, gpu, c, w, backend=backend, gpu_memory_utilization=BENCH_MEMORY_UTILIZATION
    )
    seqs, tokens = bench_engine_settings(r.seq_capacity, isl, osl, pp)
    c = CandidateArrays.from_lists(**cols, max_num_seqs=seqs, max_num_batched_tokens=tokens)
    r = evaluate_batch(
        m, gpu, c, w, backend=backend, gpu_memory_utilization=BENCH_MEMORY_UTILIZATION
    )
    return float(r.output_tok_s_per_gpu[0]) if r.seq_capacity[0] >= 1 else float("nan")


def _predict(row: pd.Series) -> float:
    gpu = resolve_gpu(row["gpu"])
    bundled = resolve_model(row["model"])
    assert gpu is not None and bundled is not None  # _reason checked both
    quant = {"fp8": "fp8", "fp4": "fp4"}.get(str(row["precision"]).lower(), "bf16")
    kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
    tp = float(row["tp"]) if pd.notna(row["tp"]) else 1.0
    pp = float(row["pp"]) if pd.notna(row["pp"]) else 1.0
    ep = float(row["ep"]) if "ep" in row and pd.notna(row["ep"]) else 1.0
    per_gpu = saturation_tok_s_per_gpu(
        load_model(bundled.key), gpu, tp, pp, ep, quant, kv, float(row["isl"]), float(row["osl"])
    )
    return per_gpu if row["metric"] == "output_tok_s_per_gpu" else per_gpu * tp * pp


REQUIRED_COLUMNS = (
    "framework_version",
    "concurrency_or_rate",
    "metric",
    "model",
    "gpu",
    "precision",
    "tp",
    "pp",
    "isl",
    "osl",
    "value",
)


def validate_throughput(
    path: Path, predictions_out: Path | None = None, progress: bool = True
) -> dict[str, object]:
    """The ``planner validate throughput`` report."""
    df = read_csv(path, "measurement CSV", "--data")
    require_columns(df, REQUIRED_COLUMNS, f"--data {path}")
    df = numeric_columns(
        df,
        {
            "tp": (1, 1024),
            "pp": (1, 1024),
            "ep": (1, 1024),
            "isl": (1, 1e7),
            "osl": (1, 1e7),
            "value": (0, 1e12),
        },
        f"--data {path}",
        integers=("tp", "pp", "ep", "isl", "osl"),
    )
    skipped: dict[str, int] = {}
    preds = []
    for _, row in df.iterrows():
        reason = _reason(row)
        if reason is None:
            try:
                p = _predict(row)
                reason = None if np.isfinite(p) else "does_not_fit"
            except PlannerInputError:  # a bundled config of a family the op graph cannot build
                reason = "unsupported_model"
        if reason:
            count(skipped, reason)
            continue
        key = resolve_gpu(row["gpu"]).key  # type: ignore[union-attr]
        preds.append({**row.to_dict(), "pred_value": p, "gpu_key": key})
        if progress and len(preds) % 100 == 0:
            sys.stderr.write(f"\rvalidate throughput: {len(preds)} rows")
    if progress:
        sys.stderr.write("\n")
    out = pd.DataFrame(preds)
    if predictions_out is not None:
        out.to_csv(predictions_out, index=False)
    groups = grouped(out, ("gpu_key", "model", "framework_version"))
    eligible = int(len(df)) - sum(skipped.get(r, 0) for r in NOT_IN_SCOPE)
    return {
        "rows": int(len(df)),
        "modelled": int(len(out)),
        "in_scope": eligible,
        "skipped": skipped,
        "groups": groups,
    }
