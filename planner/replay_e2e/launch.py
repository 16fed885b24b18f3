"""The launch settings a measured row is replayed at: its recorded columns (``layout``), else its
engine's defaults (KV pool, chunk), and the benchmark run it names (lockstep waves, lengths)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pandas as pd

from planner.engines import prefill_first
from planner.engines.kv_pool import KvPool
from planner.engines.sglang.memory import chunked_prefill as sglang_chunked_prefill
from planner.replay_e2e.layout import LOW_FRACTION_COLUMN
from planner.replay_e2e.rows import parse_version
from planner.workload import LengthSpec

ACTIVATION_SCALES = ("static", "token", "block", "tensor")
BLOCK_SCALED_MODE = "fp8_block"
"""``gemm_quant_mode`` of rows whose FP8 GEMMs are block-scaled (128-value groups)."""


def named_runs(rows: pd.DataFrame) -> pd.Series:
    """Request count of every row that names its benchmark run, else 0. Optional columns:
    ``bench_requests`` (the run's requests in all, e.g. ``--num-prompts``) and ``fixed_lengths``
    (1 every request has the row's ISL/OSL, 0 varied, empty unknown; ``planner.calibration_data``
    reads both from native result files). Such a row is priced as ``estimate --isl --osl
    --bench-requests P`` prices that run: a lockstep start-up wave of N/P, and on an engine that
    keeps fixed-length waves in lockstep (``batch_eval.lasting_lockstep``) the whole run in
    lockstep, unless its lengths are known to vary or the server mixed prefill chunks into
    decode steps (optional ``mixed_chunk`` = 1: SGLang's ``--enable-mixed-chunk``, which breaks
    the lockstep): that row keeps the fitted share."""
    if "bench_requests" not in rows:
        return pd.Series(0, index=rows.index, dtype=int)
    runs = pd.to_numeric(rows["bench_requests"], errors="coerce")
    lengths = rows["fixed_lengths"] if "fixed_lengths" in rows else pd.Series(np.nan, rows.index)
    varied = pd.to_numeric(lengths, errors="coerce") == 0
    mixed = rows["mixed_chunk"] if "mixed_chunk" in rows else pd.Series(np.nan, rows.index)
    mixes = pd.to_numeric(mixed, errors="coerce") == 1  # SGLang --enable-mixed-chunk
    lockstep = rows["backend"].map(lambda b: prefill_first(str(b))).astype(bool)
    named = (runs >= 1) & (runs < 1e9) & ~((varied | mixes) & lockstep)
    return runs.where(named, 0).fillna(0).round().astype(int)


def length_low_fractions(rows: pd.DataFrame) -> pd.Series:
    """Each row's ``LOW_FRACTION_COLUMN``, NaN where not given (fixed lengths)."""
    if LOW_FRACTION_COLUMN not in rows:
        return pd.Series(np.nan, index=rows.index)
    return pd.to_numeric(rows[LOW_FRACTION_COLUMN], errors="coerce")


def length_spec(nominal: float, low_fraction: float) -> LengthSpec:
    """The length distribution of a row's ISL or OSL: fixed at ``nominal``, or (``low_fraction``
    given) the whole numbers in [int(f x L), L] drawn uniformly: their mean and standard deviation
    (((L - lo + 1)^2 - 1) / 12)^(1/2)."""
    if not np.isfinite(low_fraction) or low_fraction >= 1.0:
        return LengthSpec(mean=nominal)
    lo = max(float(int(low_fraction * nominal)), 1.0)
    mean = (lo + nominal) / 2.0
    std = np.sqrt(((nominal - lo + 1.0) ** 2 - 1.0) / 12.0)
    return LengthSpec(mean=mean, dist="uniform", cv=float(std / mean))


def activation_scales(rows: pd.DataFrame) -> pd.Series:
    """Per row, the activation scale its FP8 GEMMs ran with where the row says so (the
    ``activation_scale`` column; a ``gemm_quant_mode`` of ``fp8_block``: "block"); "" where it
    does not (the model's checkpoint decides)."""
    out = pd.Series("", index=rows.index, dtype=object)
    if "gemm_quant_mode" in rows:
        out[rows["gemm_quant_mode"].astype(str) == BLOCK_SCALED_MODE] = "block"
    if "activation_scale" in rows:
        given = rows["activation_scale"].astype(str)
        known = given.isin(ACTIVATION_SCALES)
        out[known] = given[known]
    return out


SGLANG_RESERVE_RULE_SINCE = (0, 5, 3)
"""First SGLang release whose ``mem_fraction_static`` default follows the chunked-prefill and
CUDA-graph reserve (``memory_batch.sglang_mem_fraction``; 0.5.2 and earlier: a reserve table,
``memory_batch.sglang_052_mem_fraction``)."""


SGLANG_AT_DEFAULT = False
"""Whether SGLang rows that record no memory flag are replayed at SGLang's own default
``mem_fraction_static`` (False: at 0.9 of the device in vLLM's meaning). Off because measured
SGLang deployments did not all run at the default: a GB200 DeepSeek-V3 FP8 deployment (attention
DP 4, 181.7 GB of weights per GPU) served 16-128 clients, yet SGLang 0.5.5's default there is
0.811 of the GPU, below the weights' 0.915, so it cannot have started without a raised
``--mem-fraction-static`` (``predict.startup_utilization`` replays such a row at the flag that
starts it)."""


def kv_pool(backend: str, version: object, sglang_default: bool = SGLANG_AT_DEFAULT) -> KvPool:
    """How a measured row's engine sized its KV pool: a row that records no memory flag is
    replayed at its engine's default (``memory_batch.KvPool``), SGLang only with
    ``sglang_default`` (``SGLANG_AT_DEFAULT``). SGLang's default changed in 0.5.3; a row without
    a readable version (empty, or a build tag) takes the newer rule."""
    if backend == "trtllm":
        return KvPool.TRTLLM
    if backend == "sglang" and sglang_default:
        return KvPool.SGLANG_052 if _sglang_before_053(version) else KvPool.SGLANG
    return KvPool.VLLM


def _sglang_before_053(version: object) -> bool:
    """Whether an SGLang ``backend_version`` predates ``SGLANG_RESERVE_RULE_SINCE`` (the memory
    defaults changed there); an unreadable version (empty, a build tag) counts as newer."""
    v = parse_version(version)
    return v is not None and v < SGLANG_RESERVE_RULE_SINCE


def _backends_versions(rows: pd.DataFrame) -> Iterator[tuple[str, object]]:
    """(backend, backend_version) of every row; the version column is optional."""
    versions = rows["backend_version"] if "backend_version" in rows else [None] * len(rows)
    return zip(rows["backend"].astype(str), versions, strict=True)


def kv_pools(rows: pd.DataFrame, flags: np.ndarray | None = None) -> np.ndarray:
    """``kv_pool`` of every row (``KvPool`` values); an SGLang row that records its
    ``--mem-fraction-static`` (``flags``, default the ``memory_fraction`` column) sizes its pool
    by SGLang's rule at that fraction."""
    flags = launch_arrays(rows).memory_flag if flags is None else flags
    return np.array(
        [
            int(kv_pool(b, v, sglang_default=b == "sglang" and bool(np.isfinite(f))))
            for (b, v), f in zip(_backends_versions(rows), flags, strict=True)
        ],
        dtype=int,
    )


def engine_chunk(backend: str, version: object, memory_bytes: float, default: float) -> float:
    """``max_num_batched_tokens`` a measured row's engine ran at when the row records none: its
    engine's default. SGLang's depends on the GPU's memory and, below 60 GiB, on the version
    (``memory_batch.sglang_chunked_prefill``: 16384 on GPUs of 160 GiB and more, e.g. GB200 and
    B200, 8192 on H100 and H200, in every wheel read, 0.5.0rc0 to 0.5.23); a row without a
    readable version takes the newer rule. Other engines: ``default``, engines.yaml's value (the
    planner's own plans keep it too: they pass the flag)."""
    if backend != "sglang":
        return default
    return float(sglang_chunked_prefill(memory_bytes, _sglang_before_053(version)))


def engine_chunks(rows: pd.DataFrame, memory_bytes: float, default: float) -> np.ndarray:
    """``engine_chunk`` of every row, all on one GPU."""
    return np.array(
        [engine_chunk(b, v, memory_bytes, default) for b, v in _backends_versions(rows)]
    )


class LaunchArrays(NamedTuple):
    """Per row, the launch settings it records (``launch_arrays``)."""

    chunk: np.ndarray
    """Step token budget; NaN where none is recorded."""
    memory_flag: np.ndarray
    """Memory flag in its engine's own meaning; NaN where none is recorded."""
    adp_balance_iters: np.ndarray
    """Attention-DP balance timeout, engine steps; 0 where off."""
    batch_wait_iters: np.ndarray
    """Batch waiting timeout, engine steps; 0 where off."""
    batch_wait_tokens: np.ndarray
    """Batch waiting threshold, tokens; 0 where off."""


def _column(rows: pd.DataFrame, col: str, empty: float) -> np.ndarray:
    """The optional numeric column ``col`` of ``rows``, ``empty`` where not given."""
    if col not in rows:
        return np.full(len(rows), empty)
    values = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)
    return np.where(np.isnan(values), empty, values)


def launch_arrays(rows: pd.DataFrame) -> LaunchArrays:
    """The launch settings each row records (``layout``: ``max_num_batched_tokens``,
    ``memory_fraction``, ``attention_dp_balance_iters``, ``batch_wait_iters``,
    ``batch_wait_max_tokens``)."""
    return LaunchArrays(
        _column(rows, "max_num_batched_tokens", np.nan),
        _column(rows, "memory_fraction", np.nan),
        _column(rows, "attention_dp_balance_iters", 0.0),
        _column(rows, "batch_wait_iters", 0.0),
        _column(rows, "batch_wait_max_tokens", 0.0),
    )
