"""Replay TensorRT-LLM max-throughput rows (``trtllm_perf_overview.csv``): predicted saturation
output tokens/s (all requests queued: the engine holds as many as max batch and KV allow) vs measured.

Rows kept: ``max-throughput`` load, metric ``output_tok_s_total`` or ``output_tok_s_per_gpu``,
framework v0.14 and newer. Others are counted under a skip reason.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.input_files import numeric_columns, read_csv, require_columns
from planner.batch_eval import KV_DTYPES, WEIGHT_QUANTS, CandidateArrays, evaluate_batch
from planner.engine_calibration import engine
from planner.models import load_model
from planner.workload import fixed

MODEL_NAMES: dict[str, str] = {"70b": "llama-3.1-70b", "8b": "llama-3.1-8b", "405b": "llama-3.1-405b", "mixtral 8x7b": "mixtral-8x7b", "mixtral 8x22b": "mixtral-8x22b"}
GPU_NAMES: dict[str, str] = {"H100-SXM": "h100_sxm", "H200-SXM": "h200_sxm", "B200": "b200_sxm", "A100-SXM4": "a100_sxm", "L40S": "l40s"}
MIN_VERSION = (0, 14)
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


def bench_engine_settings(kv_requests: np.ndarray, isl: float, osl: float, pp: float) -> tuple[np.ndarray, np.ndarray]:
    """(max_batch_size, max_num_tokens) trtllm-bench builds for a dataset of fixed ISL/OSL:
    batch = KV-capacity requests (ISL + OSL each) capped at 4096/pp, tokens = batch·(1 + ISL/OSL)
    within [2048, 32768] (tensorrt_llm/bench/build/tuning.py ``finetune_setting``; its upward rounding
    to multiples of 32-1024 is left out: the batch is KV-bound either way)."""
    batch = np.minimum(kv_requests, BENCH_MAX_BATCH) / pp
    tokens = np.clip(batch * (1.0 + isl / osl), BENCH_MIN_TOKENS, BENCH_MAX_TOKENS)
    return np.maximum(batch, 1.0), tokens


def _model(name: str) -> str | None:
    low = name.lower()
    if "llama" in low and ("3" in low):
        for k in ("405b", "70b", "8b"):
            if k in low:
                return MODEL_NAMES[k]
    for k in ("mixtral 8x7b", "mixtral 8x22b"):
        if k in low:
            return MODEL_NAMES[k]
    return None


def _reason(row: pd.Series) -> str | None:
    if any(pd.isna(row[c]) for c in ("isl", "osl", "value")):
        return "incomplete_row"
    ver = re.match(r"(\d+)\.(\d+)", str(row["framework_version"]))
    if not ver or (int(ver.group(1)), int(ver.group(2))) < MIN_VERSION:
        return "older_than_v0.14"
    if not str(row["concurrency_or_rate"]).startswith("max-throughput"):
        return "not_max_throughput"
    if row["metric"] not in ("output_tok_s_total", "output_tok_s_per_gpu"):
        return "other_metric"
    if _model(str(row["model"])) is None:
        return "unknown_model"
    if not any(str(row["gpu"]).startswith(g) for g in GPU_NAMES):
        return "unknown_gpu"
    return None


def _predict(row: pd.Series) -> float:
    gpu = get_gpu(next(v for k, v in GPU_NAMES.items() if str(row["gpu"]).startswith(k)))
    m = load_model(str(_model(str(row["model"]))))
    prec = str(row["precision"]).lower()
    quant = {"fp8": "fp8", "fp4": "fp4"}.get(prec, "bf16")
    kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
    tp, pp = float(row["tp"] or 1), float(row["pp"] if pd.notna(row["pp"]) else 1)
    eng = engine("trtllm")
    cols = {"tp": tp, "pp": pp, "ep": 1, "weight_quant": WEIGHT_QUANTS.index(quant), "kv_dtype": KV_DTYPES.index(kv), "concurrency": SATURATION_CLIENTS}
    w = fixed(int(row["isl"]), int(row["osl"]), concurrency=1)
    c = CandidateArrays.from_lists(**cols, max_num_seqs=eng.max_num_seqs.value, max_num_batched_tokens=eng.max_num_batched_tokens.value)
    r = evaluate_batch(m, gpu, c, w, backend="trtllm", gpu_memory_utilization=BENCH_MEMORY_UTILIZATION)
    seqs, tokens = bench_engine_settings(r.seq_capacity, float(row["isl"]), float(row["osl"]), pp)
    c = CandidateArrays.from_lists(**cols, max_num_seqs=seqs, max_num_batched_tokens=tokens)
    r = evaluate_batch(m, gpu, c, w, backend="trtllm", gpu_memory_utilization=BENCH_MEMORY_UTILIZATION)
    per_gpu = float(r.output_tok_s_per_gpu[0]) if r.seq_capacity[0] >= 1 else np.nan
    return per_gpu if row["metric"] == "output_tok_s_per_gpu" else per_gpu * tp * pp


REQUIRED_COLUMNS = ("framework_version", "concurrency_or_rate", "metric", "model", "gpu",
                    "precision", "tp", "pp", "isl", "osl", "value")


def validate_throughput(path: Path, predictions_out: Path | None = None, progress: bool = True) -> dict[str, object]:
    """The ``planner validate throughput`` report."""
    df = read_csv(path, "measurement CSV", "--data")
    require_columns(df, REQUIRED_COLUMNS, f"--data {path}")
    df = numeric_columns(df, {"tp": (0, 1024), "pp": (0, 1024), "isl": (1, 1e7), "osl": (1, 1e7),
                              "value": (0, 1e12)}, f"--data {path}")
    skipped: dict[str, int] = {}
    preds = []
    for _, row in df.iterrows():
        reason = _reason(row)
        if reason is None:
            p = _predict(row)
            reason = None if np.isfinite(p) else "does_not_fit"
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        preds.append({**row.to_dict(), "pred_value": p})
        if progress and len(preds) % 100 == 0:
            sys.stderr.write(f"\rvalidate throughput: {len(preds)} rows")
    if progress:
        sys.stderr.write("\n")
    out = pd.DataFrame(preds)
    if predictions_out is not None:
        out.to_csv(predictions_out, index=False)
    by_cols = ("gpu", "model", "framework_version")
    groups = [] if out.empty else [_group("overall", "all", out)] + [
        _group(by, str(k), s) for by in by_cols for k, s in out.groupby(by)]
    return {"rows": int(len(df)), "modelled": int(len(out)), "skipped": skipped, "groups": groups}


def _group(by: str, key: str, sub: pd.DataFrame) -> dict[str, object]:
    ape = (np.abs(sub["pred_value"] - sub["value"]) / sub["value"] * 100.0).to_numpy(float)
    signed = ((sub["pred_value"] - sub["value"]) / sub["value"] * 100.0).to_numpy(float)
    return {"by": by, "key": key, "n": int(len(sub)), "throughput": {
        "median_ape_pct": float(np.median(ape)) if len(ape) else float("nan"),
        "p90_ape_pct": float(np.percentile(ape, 90)) if len(ape) else float("nan"),
        "median_signed_pct": float(np.median(signed)) if len(signed) else float("nan")}}
