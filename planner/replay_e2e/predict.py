"""Replay prepared e2e rows (``candidates.prepare``) through the serving model: rows are grouped
by model, GPU, engine, lengths, named run and activation scale, and each group is priced in one
vectorised ``evaluate_batch`` call at the launch settings the rows record (``launch``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from planner.engines import get_engine
from planner.engines.base import KvPool
from planner.engines.calibration import EngineCalibration, EnginePolicy, engine
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, Reason, ResultArrays, evaluate_batch
from planner.perf.workers import RecordedLaunch
from planner.replay_e2e.launch import (
    activation_scales,
    engine_chunks,
    kv_pools,
    launch_arrays,
    length_low_fractions,
    length_spec,
    named_runs,
)
from planner.workload.spec import fixed

CONST_PREFIX = "const_"
"""Prefix of the per-row engine-constant columns (``with_constants``)."""
PREDICTION_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "pred_tok_s_per_gpu", "pred_prefill_util")


def with_constants(rows: pd.DataFrame, values: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """``rows`` with a ``const_<name>`` column per fitted engine constant: ``values[backend][name]``
    of each row's backend (``predict`` prices every row with its own constants)."""
    out = rows.copy()
    names = sorted({n for v in values.values() for n in v})
    for name in names:
        by_backend = {b: float(v[name]) for b, v in values.items() if name in v}
        out[f"{CONST_PREFIX}{name}"] = out["backend"].map(by_backend).astype(float)
    return out


def _row_constants(sub: pd.DataFrame) -> dict[str, np.ndarray] | None:
    cols = [c for c in sub.columns if c.startswith(CONST_PREFIX)]
    if not cols:
        return None
    vals = {c.removeprefix(CONST_PREFIX): sub[c].to_numpy(dtype=float) for c in cols}
    return {k: v for k, v in vals.items() if np.isfinite(v).all()}


def _set_or_none(values: np.ndarray) -> np.ndarray | None:
    """``values`` where any is non-zero, else None (the option is off on every row)."""
    return values if values.any() else None


_GroupKey = tuple[str, str, str, float, float, int, float, str]
"""A ``predict`` group: model, GPU, engine, ISL, OSL, named run (0: none), length spread (1:
fixed lengths), FP8 activation scale ("" : the checkpoint's)."""


def _group_key(key: tuple[Any, ...]) -> _GroupKey:
    model, system, backend, isl, osl, runs, frac, act = key
    return (
        str(model),
        str(system),
        str(backend),
        float(isl),
        float(osl),
        int(runs),
        float(frac),
        str(act or ""),
    )


def _candidates(sub: pd.DataFrame, eng: EngineCalibration, chunk: np.ndarray) -> CandidateArrays:
    """The rows' ``c_*`` columns as candidates; an empty slot cap takes the engine's."""
    given = {
        c: sub[f"c_{c}"].to_numpy(dtype=float)
        for c in CandidateArrays.__dataclass_fields__
        if f"c_{c}" in sub
    }
    seqs = given.pop("max_num_seqs", np.full(len(sub), np.nan))
    given["max_num_seqs"] = np.where(np.isnan(seqs), eng.max_num_seqs.value, seqs)
    return CandidateArrays.from_lists(**given, max_num_batched_tokens=chunk)


def _group_replay(
    sub: pd.DataFrame, key: _GroupKey, overrides: dict[str, EngineCalibration] | None
) -> tuple[Callable[..., ResultArrays], CandidateArrays, np.ndarray, np.ndarray]:
    """(evaluate_batch with the rows' deployment, workload and launch settings bound, the rows'
    candidates, the memory flag they record (NaN: none), their engines' KV pools) for the rows
    ``sub`` of one ``predict`` group ``key``; the memory settings are left to the call."""
    model, system, backend, isl, osl, runs, frac, act = key
    spec = load_model(model)
    if act:  # the FP8 activation scale the row records
        spec = spec.model_copy(
            update={"quant": spec.quant.model_copy(update={"activation_scale": act})}
        )
    eng = (overrides or {}).get(str(backend)) or engine(str(backend))
    gpu = get_gpu(str(system))
    launch = launch_arrays(sub)
    chunk = engine_chunks(sub, gpu.memory_bytes, eng.max_num_batched_tokens.value)
    chunk = np.where(np.isfinite(launch.chunk), launch.chunk, chunk)
    cand = _candidates(sub, eng, chunk)
    # a benchmark run: its lockstep start-up wave priced with the engine's fitted share, or
    # the named run itself (as `estimate --bench-requests` prices it) where the row names it
    run = {"bench_requests": int(runs)} if runs else {"startup_wave": True}
    lengths = {"isl": length_spec(float(isl), frac), "osl": length_spec(float(osl), frac)}
    bench = fixed(int(isl), int(osl), concurrency=1).model_copy(update=run | lengths)
    engine_def = get_engine(str(backend))
    # the scheduler holds only where a launch set them (None: no per-step work for them)
    holds = None
    if engine_def.launch_holds is not None:
        holds = engine_def.launch_holds(
            _set_or_none(launch.adp_balance_iters),
            _set_or_none(launch.batch_wait_iters),
            _set_or_none(launch.batch_wait_tokens),
        )
    recorded = RecordedLaunch(
        holds=holds, decode_routers=_routers(sub), constants=_row_constants(sub)
    )
    replay = partial(
        _replay, spec, gpu, cand, bench, backend=EnginePolicy(engine_def, eng, ""), launch=recorded
    )
    return replay, cand, launch.memory_flag, kv_pools(sub, launch.memory_flag)


def _replay(
    *args: object,
    launch: RecordedLaunch,
    kv_pool: np.ndarray | None = None,
    pool_flag: np.ndarray | None = None,
    **kw: object,
) -> ResultArrays:
    """``evaluate_batch`` of a recorded ``launch`` at the KV pool and memory flag given."""
    rec = replace(launch, kv_pool=kv_pool, pool_flag=pool_flag)
    return evaluate_batch(*args, recorded=rec, **kw)  # type: ignore[arg-type]


def _routers(rows: pd.DataFrame) -> np.ndarray | None:
    """Per prepared row, the slot-blind routers in front of the decode workers
    (``c_decode_routers``, the ``decode_routers`` column; NaN where none); None where no row has
    them."""
    if "c_decode_routers" not in rows:
        return None
    out = rows["c_decode_routers"].to_numpy(dtype=float)
    return out if np.isfinite(out).any() else None


def _predicted(res: ResultArrays) -> dict[str, np.ndarray]:
    """The prediction columns ``predict`` writes, from one replay."""
    return {
        "pred_ttft_ms": res.ttft_mean_s * 1e3,
        "pred_tpot_ms": res.tpot_mean_s * 1e3,
        "pred_tok_s_per_gpu": np.asarray(res.output_tok_s_per_gpu, dtype=float),
        "pred_prefill_util": np.asarray(res.prefill_utilization, dtype=float),  # the bands' load
    }


def _replay_group(
    sub: pd.DataFrame, key: _GroupKey, overrides: dict[str, EngineCalibration] | None
) -> dict[str, np.ndarray]:
    """The prediction columns of one group's rows; rows replayed out of memory at a flag no
    launch recorded are priced at the flag that starts them (``startup_utilization``)."""
    replay, _, memory_flag, pools = _group_replay(sub, key, overrides)
    res = replay(kv_pool=pools, pool_flag=memory_flag)
    pred = _predicted(res)
    oom = np.asarray(res.infeasible_reason == Reason.OUT_OF_MEMORY) & np.isnan(memory_flag)
    if oom.any():
        o_replay, o_cand, _, o_pools = _group_replay(sub[oom], key, overrides)
        started = startup_utilization(o_cand, partial(_at_utilization, o_replay))
        ran = np.isfinite(started)
        o_res = o_replay(
            gpu_memory_utilization=np.where(ran, started, 0.9),
            kv_pool=np.where(ran, KvPool.DEVICE, o_pools),
            pool_flag=np.full(len(o_cand), np.nan),
        )
        for col, values in _predicted(o_res).items():
            pred[col][oom] = values
    return pred


def predict(
    rows: pd.DataFrame, progress: bool = True, overrides: dict[str, EngineCalibration] | None = None
) -> pd.DataFrame:
    """Add pred_ttft_ms / pred_tpot_ms / pred_tok_s_per_gpu / pred_prefill_util to prepared rows;
    ``const_<name>`` columns (``with_constants``) replace the engines' fitted constants row by
    row; each row's KV pool and chunk are its recorded settings, else its engine's defaults
    (``launch.kv_pool``, ``launch.engine_chunk``)."""
    out = rows.copy()
    for col in PREDICTION_COLUMNS:
        out[col] = np.nan
    keys = [out[c] for c in ("model_path", "system", "backend", "isl", "osl")]
    low = length_low_fractions(out).fillna(1.0)  # 1: fixed lengths (groupby drops NaN keys)
    acts = activation_scales(out)
    groups = list(out.groupby([*keys, named_runs(out), low, acts]).groups.items())
    for n, (raw_key, idx) in enumerate(groups):
        pred = _replay_group(out.loc[idx], _group_key(raw_key), overrides)
        for col, values in pred.items():
            out.loc[idx, col] = values
        if progress and (n % 50 == 0 or n == len(groups) - 1):
            sys.stderr.write(f"\rvalidate e2e: group {n + 1}/{len(groups)}")
    if progress:
        sys.stderr.write("\n")
    return out


STARTUP_UTILIZATIONS = tuple(round(0.9 + 0.01 * i, 2) for i in range(11))
"""Memory flags (share of the device, ``gpu_memory_utilization``) a replay tries, in order, on a
measured deployment that does not start at the flag it is replayed at (``startup_utilization``)."""


def _at_utilization(replay: Callable[..., ResultArrays], util: float) -> ResultArrays:
    return replay(gpu_memory_utilization=util)


def startup_utilization(
    cand: CandidateArrays, replay: Callable[[float], ResultArrays]
) -> np.ndarray:
    """Per row of measured deployments that do not start at the memory flag they are replayed at
    and that record none, the flag they ran at (NaN: none starts them).

    Such rows are replayed at their engine's default or at 0.9 of the device
    (``launch.kv_pool``). A measured row ran, so its engine loaded the weights and kept a
    KV pool; a replay that finds no room for one sequence (``Reason.OUT_OF_MEMORY``) contradicts
    the row, and pricing it anyway would cap each worker at one running request (e.g. a GB200
    DeepSeek-V3 FP8 worker of 4 GPUs with attention DP, 181.7 GB of weights per GPU, which served
    16-128 clients although its engine's default and 0.9 of the device are both below its
    weights).
    The launch must have raised its memory flag, which the row does not record; the replay takes
    the smallest of ``STARTUP_UTILIZATIONS`` (share of the device) at which the
    deployment holds its clients' sequences. Where none does, the run queued for KV at any flag,
    and the replay gives it the most room a launch could (the largest flag, where the deployment
    starts there). ``replay(u)`` prices the rows at utilization ``u``."""
    out = np.full(len(cand), np.nan)
    clients = cand.concurrency / np.maximum(cand.workers, 1.0)
    starts = np.zeros(len(cand), dtype=bool)
    for util in STARTUP_UTILIZATIONS:
        r = replay(util)
        starts = np.asarray(r.infeasible_reason != Reason.OUT_OF_MEMORY)
        out = np.where(np.isnan(out) & starts & (r.seq_capacity >= clients), util, out)
        if not np.isnan(out).any():
            return out
    return np.where(np.isnan(out) & starts, STARTUP_UTILIZATIONS[-1], out)
