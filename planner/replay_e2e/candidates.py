"""Candidate columns of measured e2e rows (``layout``): the deployment each row ran, read from its
columns only. Rows that cannot be modelled are counted under a reason, never dropped silently."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.engines import engine_names, get_engine
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS

QUANT_MODES: dict[str, str] = {
    "fp8": "fp8",
    "fp8_block": "fp8",
    "nvfp4": "fp4",
    "int4_wo": "int4",
    "bf16": "bf16",
    "fp16": "bf16",
}


@dataclass(frozen=True)
class Prepared:
    """Rows with candidate columns filled in, and the skip reason of every other row."""

    rows: pd.DataFrame
    skipped: dict[str, int]


def _num(row: pd.Series, col: str, default: float = 1.0) -> float:
    v = row.get(col)
    return default if v is None or pd.isna(v) or float(v) <= 0 else float(v)


def _flag(row: pd.Series, col: str) -> bool:
    """Whether the optional 0/1 column ``col`` is 1 on ``row``."""
    v = row.get(col)
    return v is not None and not pd.isna(v) and float(v) == 1.0


def _concurrency(row: pd.Series, dp: float) -> float:
    """Closed-loop clients of the benchmark: the ``concurrency`` column; else for an aggregated
    row ``batch_size`` per attention-DP rank (the harness runs batch_size x attention-DP clients),
    for a disaggregated row the decode batch of every decode worker."""
    given = _num(row, "concurrency", np.nan)
    if np.isfinite(given):
        return given
    if row["mode"] == "agg":
        return _num(row, "batch_size", np.nan) * dp
    return _num(row, "decode_batch_size", np.nan) * _num(row, "decode_num_workers", np.nan)


def _attention_dp(row: pd.Series, role: str, tp: float, ep: float) -> float:
    """Attention-DP ranks of a worker. The layout's rule is tp·dp = moe_tp·moe_ep (the MoE layers
    span every rank of the worker); rows that leave ``attention_dp_size`` empty but give a wider MoE
    (vLLM ``--data-parallel-size`` without expert parallelism: ``tp_size`` 1, ``moe_tp_size`` 2 is
    two GPUs, one attention replica each, MoE sharded over both) take dp = moe_tp·moe_ep / tp
    instead of silently running the whole model on ``tp`` GPUs."""
    dp = row.get(f"{role}attention_dp_size")
    if dp is not None and not pd.isna(dp) and float(dp) > 0:
        return float(dp)
    moe = _num(row, f"{role}moe_tp_size") * ep
    return moe / tp if moe > tp and moe % tp == 0 else 1.0


def _kv_dtype(row: pd.Series, quant: str) -> str:
    """The row's ``kv_dtype`` where given, else FP8 where its engine's default KV dtype follows
    FP8 or FP4 weights (``Engine.kv_dtype_follows_weights``), else BF16."""
    given = row.get("kv_dtype")
    if isinstance(given, str) and given in KV_DTYPES:
        return given
    follows = get_engine(str(row["backend"])).kv_dtype_follows_weights
    return "fp8" if follows and quant in ("fp8", "fp4") else "bf16"


def candidate_columns(row: pd.Series, weight_default: str) -> dict[str, float] | str:
    """CandidateArrays columns of one row, or the reason it cannot be modelled."""
    quant = QUANT_MODES.get(str(row.get("gemm_quant_mode")), weight_default)
    agg_tp, agg_ep = _num(row, "tp_size"), _num(row, "moe_ep_size")
    agg_dp = _attention_dp(row, "", agg_tp, agg_ep)
    conc = _concurrency(row, agg_dp)
    if _flag(row, "ep_all_ranks"):
        agg_ep = agg_tp * agg_dp
    if not np.isfinite(conc):
        return "incomplete_config"
    out = {
        "weight_quant": WEIGHT_QUANTS.index(quant),
        "kv_dtype": KV_DTYPES.index(_kv_dtype(row, quant)),
        "concurrency": conc,
    }
    if row["mode"] == "agg":
        # batch_size is not an engine cap: rows that recorded more clients than batch_size x
        # attention DP ran them all (TPOT grows with them, TTFT shows no admission queue)
        out |= {"tp": agg_tp, "pp": _num(row, "pp_size"), "dp": agg_dp, "ep": agg_ep, "mode": 0}
        return out
    if pd.isna(row.get("prefill_num_workers")) or pd.isna(row.get("decode_num_workers")):
        return "incomplete_config"
    return out | _disagg_columns(row)


def _disagg_columns(row: pd.Series) -> dict[str, float]:
    """The CandidateArrays columns of a disaggregated row's two roles."""
    (tp, dp, ep), (p_tp, p_dp, p_ep) = (_disagg_role(row, r) for r in ("decode_", "prefill_"))
    return {
        "mode": 1,
        "tp": tp,
        "pp": _num(row, "decode_pp_size"),
        "dp": dp,
        "ep": ep,
        "workers": _num(row, "decode_num_workers"),
        "prefill_tp": p_tp,
        "prefill_pp": _num(row, "prefill_pp_size"),
        "prefill_dp": p_dp,
        "prefill_ep": p_ep,
        "prefill_workers": _num(row, "prefill_num_workers"),
        # the deployment's batch sizes per (DP rank of a) worker: prompts per prefill step, decode
        # slots
        "prefill_max_num_seqs": _num(row, "prefill_batch_size", np.nan),
        "max_num_seqs": _num(row, "decode_max_num_seqs", _num(row, "decode_batch_size", np.nan)),
        # not a CandidateArrays field: read once here, passed to the replay (``predict``)
        "decode_routers": _num(row, "decode_routers", np.nan),
    }


def _disagg_role(row: pd.Series, role: str) -> tuple[float, float, float]:
    """(TP, attention DP, EP) of a disaggregated row's ``role`` (``prefill_`` / ``decode_``)
    worker; where the role ran expert-parallel over all its ranks (``<role>ep_all_ranks``), EP
    spans the worker's GPUs whatever the row records."""
    tp, ep = _num(row, f"{role}tp_size"), _num(row, f"{role}moe_ep_size")
    dp = _attention_dp(row, role, tp, ep)
    if _flag(row, f"{role}ep_all_ranks"):
        ep = tp * dp
    return tp, dp, ep


def _runnable_tp(model: ModelSpec, c: Mapping[str, float]) -> bool:
    """Whether every role's tensor parallelism divides the model's attention heads, as every engine
    requires (and ``planner.perf.memory_plan.check_parallelism``). Rows that fail it do not record
    their
    deployment: e.g. GB200 rows whose ``tp_size`` is the GPU count of a whole disaggregated
    deployment (20, 28 or 72 GPUs for DeepSeek-R1's 128 heads)."""
    tps = [c.get("tp", 1.0), c.get("prefill_tp", 1.0)]
    return all(model.num_heads % int(tp) == 0 for tp in tps if np.isfinite(tp))


def prepare(df: pd.DataFrame) -> Prepared:
    """Resolve model, GPU, backend and candidate columns of every row; count the rest by reason."""
    skipped: dict[str, int] = {}
    keep, cols = [], []
    for i, row in df.iterrows():
        reason = None
        try:
            model = load_model(str(row["model_path"]))
            get_gpu(str(row["system"]))
        except PlannerInputError:
            reason = "unknown_model_or_gpu"
        if reason is None and row["backend"] not in engine_names():
            reason = "unknown_backend"
        c = candidate_columns(row, model.weight_dtype) if reason is None else reason
        if not isinstance(c, str) and not _runnable_tp(model, c):
            c = "tp_not_dividing_heads"
        if isinstance(c, str):
            skipped[c] = skipped.get(c, 0) + 1
            continue
        keep.append(i)
        cols.append({f"c_{k}": v for k, v in c.items()})
    rows = df.loc[keep].reset_index(drop=True)
    return Prepared(pd.concat([rows, pd.DataFrame(cols)], axis=1), skipped)
