"""The launch settings a measured row is replayed at: its recorded columns (``layout``), else its
engine's defaults (KV pool, chunk), and the benchmark run it names (lockstep waves, lengths)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pandas as pd

from planner.engines import engine_names, get_engine, prefill_first
from planner.engines.base import KvPool
from planner.replay_e2e.layout import LOW_FRACTION_COLUMN
from planner.workload.spec import LengthSpec

ACTIVATION_SCALES = ("static", "token", "block", "tensor")
BLOCK_SCALED_MODE = "fp8_block"
"""``gemm_quant_mode`` of rows whose FP8 GEMMs are block-scaled (128-value groups)."""


def named_runs(rows: pd.DataFrame) -> pd.Series:
    """Request count of every row that names its benchmark run, else 0. Optional columns:
    ``bench_requests`` (the run's requests in all, e.g. ``--num-prompts``) and ``fixed_lengths``
    (1 every request has the row's ISL/OSL, 0 varied, empty unknown; ``planner.calibration.data``
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


def kv_pool(backend: str, version: object, flag_recorded: bool = False) -> int:
    """How a measured row's engine sized its KV pool: rows rarely record their memory flag, so
    each is replayed at its engine's rule (``Engine.replay_pool``: the engine's default, or its
    rule at the flag the row records); an engine without one, or an unknown name, at a share of
    the device (``KvPool.DEVICE``)."""
    rule = get_engine(backend).replay_pool if backend in engine_names() else None
    return KvPool.DEVICE if rule is None else rule(version, flag_recorded)


def _backends_versions(rows: pd.DataFrame) -> Iterator[tuple[str, object]]:
    """(backend, backend_version) of every row; the version column is optional."""
    versions = rows["backend_version"] if "backend_version" in rows else [None] * len(rows)
    return zip(rows["backend"].astype(str), versions, strict=True)


def kv_pools(rows: pd.DataFrame, flags: np.ndarray | None = None) -> np.ndarray:
    """``kv_pool`` of every row (``KvPool`` values); a row that records its engine's memory flag
    (``flags``, default the ``memory_fraction`` column) sizes its pool by its engine's rule at
    that flag."""
    flags = launch_arrays(rows).memory_flag if flags is None else flags
    return np.array(
        [
            int(kv_pool(b, v, flag_recorded=bool(np.isfinite(f))))
            for (b, v), f in zip(_backends_versions(rows), flags, strict=True)
        ],
        dtype=int,
    )


def engine_chunk(backend: str, version: object, memory_bytes: float, default: float) -> float:
    """``max_num_batched_tokens`` a measured row's engine ran at when the row records none: its
    engine's default for that GPU and version (``Engine.replay_chunk``), else ``default``, the
    engine constant (the planner's own plans keep it too: they pass the flag)."""
    rule = get_engine(backend).replay_chunk if backend in engine_names() else None
    return default if rule is None else float(rule(memory_bytes, version))


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
