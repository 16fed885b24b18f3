"""Decision-level validation: among measured deployments of one group, is our top pick the best?

Groups are (model, system, backend, precision, isl, osl, mode) of
``../shared/validation/e2e/silicon_measured.csv``. Each row is a configuration run as a closed loop
of N clients; its measured output tokens/s per GPU is N / (TTFT + (osl-1)·TPOT) · osl / GPUs.
Within a group, the measured best is the row with the highest measured tok/s/GPU that meets the
stated SLO; our pick is the row with the highest *predicted* tok/s/GPU among rows we predict to meet
it (all rows when we predict none). A group counts as top-1 when our pick is the measured best and as
within-5% when our pick meets the SLO as measured and reaches >= 95% of the best's throughput.
Groups with fewer than two rows, or none meeting the SLO as measured, or whose model or GPU is not
in the catalog are skipped. DataFrames stay here, at the edge.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.spec import GpuSpec
from planner.model_spec import ModelSpec
from planner.models import load_model
from solvers.disagg import PhaseSet, unit_metrics
from solvers.memory_vec import memory_arrays, shard_terms
from solvers.perf import Engine, agg_metrics, decode_metrics, engine_for, prefill_metrics
from solvers.space import KV_DTYPES, QUANTS, Workers

DEFAULT_TTFT_MS = 3000.0
"""Stated SLO of the check: interactive chat, first token within 3 s ..."""
DEFAULT_TPOT_MS = 50.0
"""... and at least 20 tokens/s per user."""
GROUP_KEYS = ["model_path", "system", "backend", "precision", "isl", "osl", "mode"]
WITHIN = 0.95
CHUNK_TOKENS = 8192
MEM_FRACTION = 0.9
PRECISION: dict[str, tuple[str, str]] = {"fp8": ("fp8", "fp8"), "fp4": ("fp4", "fp8"), "int4": ("int4", "fp8"),
                                         "bf16": ("bf16", "bf16"), "fp16": ("bf16", "bf16")}
"""Row precision -> (weight dtype, KV dtype); FP8/FP4 rows run FP8 KV (validation README)."""


def default_data_path() -> Path:
    """``<repo>/../shared/validation/e2e/silicon_measured.csv``."""
    return Path(__file__).resolve().parents[2] / "shared" / "validation" / "e2e" / "silicon_measured.csv"


def _col(df: pd.DataFrame, name: str, default: float = 1.0) -> np.ndarray:
    return df[name].fillna(default).to_numpy(dtype=float).astype(int)


def _concurrency(df: pd.DataFrame) -> np.ndarray:
    found = df["silicon_data_source"].astype(str).map(lambda s: re.search(r"silicon_concurrency=(\d+)", s))
    conc = np.array([float(m.group(1)) if m else np.nan for m in found])
    return np.where(np.isfinite(conc), conc, df["batch_size"].fillna(1).to_numpy(dtype=float))


def _workers(df: pd.DataFrame, prefix: str, quant: str, kv: str, seqs: np.ndarray) -> Workers:
    n = len(df)
    ep = _col(df, f"{prefix}moe_ep_size")
    return Workers(gpu=np.zeros(n, int), tp=_col(df, f"{prefix}tp_size"), pp=_col(df, f"{prefix}pp_size"),
                   dp=_col(df, f"{prefix}attention_dp_size"), ep=ep, quant=np.full(n, QUANTS.index(quant)),
                   kv=np.full(n, KV_DTYPES.index(kv)), max_num_seqs=np.maximum(seqs, 1).astype(int),
                   chunk=np.full(n, CHUNK_TOKENS), mem_frac=np.full(n, MEM_FRACTION))


def _cap(m: ModelSpec, gpu: GpuSpec, w: Workers, isl: int, osl: int) -> tuple[np.ndarray, np.ndarray]:
    terms = shard_terms(m, w, isl, osl)
    mem = memory_arrays(np.full(w.size, gpu.memory_bytes), w, terms)
    return np.maximum(mem.max_concurrency, 1), terms.transfer_kv_per_token


def predict_group(m: ModelSpec, gpu: GpuSpec, eng: Engine, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicted (TTFT ms, TPOT ms, tok/s/GPU) of each row, at the median."""
    isl, osl = int(df["isl"].iloc[0]), int(df["osl"].iloc[0])
    quant, kv = PRECISION.get(str(df["precision"].iloc[0]), ("bf16", "bf16"))
    conc = _concurrency(df)
    if df["mode"].iloc[0] == "agg":
        w = _workers(df, "", quant, kv, conc)
        cap, _ = _cap(m, gpu, w, isl, osl)
        met = agg_metrics(m, gpu, eng, w, cap, conc, isl, osl)
        return met.ttft_ms[1], met.tpot_ms[1], met.output_tok_s_per_gpu
    x, y = _col(df, "prefill_num_workers"), _col(df, "decode_num_workers")
    wp = _workers(df, "prefill_", quant, kv, np.ones(len(df)))
    per_dec = np.ceil(conc / y)
    wd = _workers(df, "decode_", quant, kv, per_dec)
    _, pkv = _cap(m, gpu, wp, isl, osl)
    dcap, _ = _cap(m, gpu, wd, isl, osl)
    pre = PhaseSet(wp, np.zeros(len(df), int), pkv, prefill=prefill_metrics(m, gpu, eng, wp, isl))
    dec = PhaseSet(wd, per_dec, pkv, decode=decode_metrics(m, gpu, eng, wd, dcap, per_dec, isl, osl))
    idx = np.arange(len(df))
    met = unit_metrics(gpu, eng, pre, dec, idx, idx, x, y, isl, osl)
    return met.ttft_ms[1], met.tpot_ms[1], met.output_tok_s_per_gpu


def measured_tok_per_gpu(df: pd.DataFrame) -> np.ndarray:
    """Closed-loop output tokens/s per GPU from measured TTFT and TPOT."""
    conc, osl = _concurrency(df), df["osl"].to_numpy(dtype=float)
    cycle = (df["silicon_ttft_ms"].to_numpy() + (osl - 1) * df["silicon_tpot_ms"].to_numpy()) / 1e3
    agg = df["mode"].to_numpy() == "agg"
    gpus_agg = _col(df, "tp_size") * _col(df, "pp_size") * _col(df, "attention_dp_size")
    gpus_dis = _col(df, "prefill_num_workers") * _col(df, "prefill_tp_size") * _col(df, "prefill_pp_size") * \
        _col(df, "prefill_attention_dp_size") + _col(df, "decode_num_workers") * _col(df, "decode_tp_size") * \
        _col(df, "decode_pp_size") * _col(df, "decode_attention_dp_size")
    return conc / cycle * osl / np.where(agg, gpus_agg, gpus_dis)


def judge(meas_tok: np.ndarray, meas_ok: np.ndarray, pred_tok: np.ndarray, pred_ok: np.ndarray) -> tuple[bool, bool]:
    """(top-1, within 5%) for one group (see the module docstring)."""
    best = int(np.argmax(np.where(meas_ok, meas_tok, -np.inf)))
    pool = pred_ok if pred_ok.any() else np.ones_like(pred_ok)
    pick = int(np.argmax(np.where(pool, np.nan_to_num(pred_tok, nan=-1.0), -np.inf)))
    within = bool(meas_ok[pick]) and meas_tok[pick] >= WITHIN * meas_tok[best]
    return pick == best, within or pick == best


def validate_decisions(path: str | Path, *, ttft_ms: float = DEFAULT_TTFT_MS, tpot_ms: float = DEFAULT_TPOT_MS) -> dict[str, Any]:
    """``{"groups": G, "top1_pct": ..., "within5_pct": ...}`` plus skip counts and per-group rows."""
    df = pd.read_csv(path)
    eng_cache: dict[str, Engine] = {}
    rows: list[dict[str, Any]] = []
    skipped, t0 = 0, time.perf_counter()
    groups = list(df.groupby(GROUP_KEYS, sort=True))
    for n, (key, g) in enumerate(groups):
        meas = measured_tok_per_gpu(g)
        meas_ok = (g["silicon_ttft_ms"].to_numpy() <= ttft_ms) & (g["silicon_tpot_ms"].to_numpy() <= tpot_ms)
        if len(g) < 2 or not meas_ok.any():
            skipped += 1
            continue
        try:
            m, gpu = load_model(str(key[0])), get_gpu(str(key[1]))
            eng = eng_cache.setdefault(str(key[2]), engine_for(str(key[2])))
            ttft, tpot, tok = predict_group(m, gpu, eng, g)
        except (ValueError, KeyError, AssertionError):
            skipped += 1
            continue
        top1, within = judge(meas, meas_ok, tok, (ttft <= ttft_ms) & (tpot <= tpot_ms))
        rows.append({"group": "/".join(map(str, key)), "rows": len(g), "top1": top1, "within5": within})
        if time.perf_counter() - t0 > 2.0 and n % 20 == 0:
            sys.stderr.write(f"validate decisions: {n + 1}/{len(groups)} groups\n")
    g_count = len(rows)
    pct = (lambda k: round(100.0 * sum(bool(r[k]) for r in rows) / g_count, 1)) if g_count else (lambda k: 0.0)
    return {"groups": g_count, "top1_pct": pct("top1"), "within5_pct": pct("within5"), "skipped_groups": skipped,
            "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}, "per_group": rows}
