"""Per-role times of disaggregated workers, vectorized: what the P/D solvers rank and size workers
by.

``evaluate_batch`` predicts whole deployments; a P/D search first needs each role on its own:

* prefill worker: seconds one prompt needs alone (its ``ceil(ISL / chunk)`` chunks) and busy seconds
  per request when chunks run full (1 / capacity, requests/s);
* decode worker: seconds of a decode-only step at ``batch`` running requests.

Both are priced exactly as :func:`planner.perf.serving.solve_disagg` prices them (same step mixes,
same
worker arrays and pricer as :func:`planner.perf.batch.evaluate_batch`), so rankings made here agree
with the predictions the solvers report, which always come from ``evaluate_batch``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.engines import DEFAULT_ENGINE
from planner.engines.calibration import EnginePolicy, policy_of
from planner.model.spec import ModelSpec
from planner.perf.batch import (
    CandidateArrays,
    load_arrays,
    lockstep_share,
    op_pricer,
    parallel_arrays,
)
from planner.perf.opgraph import StepMix
from planner.perf.serving import _steps, prefill_times, verify_rows
from planner.perf.step import OpPricer
from planner.perf.workers import RoleColumns, WorkerSetting, prefill_kernels, worker_arrays
from planner.workload.spec import Workload


@dataclass(frozen=True)
class PrefillRole:
    """Prefill workers (K candidates), seconds."""

    alone_s: np.ndarray  # one prompt alone on an idle prefill worker
    work_s: np.ndarray  # prefill-worker seconds per request at full chunks (1 / capacity)
    fits: np.ndarray  # bool: one prompt's KV fits


def prefill_role(
    m: ModelSpec,
    gpu: GpuSpec,
    c: CandidateArrays,
    w: Workload,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    pricer: OpPricer | None = None,
    gpu_memory_utilization: float | np.ndarray = 0.9,
) -> PrefillRole:
    """The prefill role of ``c`` (its ``prefill_*`` columns, ``prefill_max_num_seqs`` prompts per
    step and attention-DP rank), priced by ``serving.prefill_times`` as ``solve_disagg`` prices
    it."""
    cal = policy_of(backend).calibration
    k = len(c)
    load = load_arrays(w, k, np.full(k, np.nan), cal.disagg_request_overhead_s.value)
    par = parallel_arrays(
        gpu, c.prefill_tp, c.prefill_pp, c.prefill_dp, c.prefill_ep, c.weight_quant, c.kv_dtype
    )
    role = RoleColumns(
        par,
        c.prefill_max_num_seqs,
        c.prefill_max_num_batched_tokens,
        c.prefill_workers,
        load.isl + 1,
    )
    setting = WorkerSetting(m, gpu, cal, gpu_memory_utilization)
    pre = worker_arrays(setting, role, lockstep_share(w, load.concurrency, cal))
    pre = prefill_kernels(pre, cal, k)
    pt = prefill_times(m, op_pricer(gpu, pricer), pre, load.isl_compute)
    return PrefillRole(pt.chunks * pt.t_one, pt.work, pre.seq_capacity >= 1)


@dataclass(frozen=True)
class DecodeRole:
    """Decode workers (K candidates)."""

    step_s: np.ndarray  # decode-only step at the given batch (x speculative-decoding multiplier)
    seq_capacity: np.ndarray  # sequences one worker holds (``batch_eval.kv_tokens_held`` each)


def decode_role(
    m: ModelSpec,
    gpu: GpuSpec,
    c: CandidateArrays,
    w: Workload,
    batch: np.ndarray,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    pricer: OpPricer | None = None,
    gpu_memory_utilization: float | np.ndarray = 0.9,
) -> DecodeRole:
    """The decode role of ``c`` (its main columns) at ``batch`` running requests per worker."""
    cal = policy_of(backend).calibration
    k = len(c)
    load = load_arrays(w, k, np.full(k, np.nan), cal.disagg_request_overhead_s.value)
    zero = np.zeros(k)
    par = parallel_arrays(gpu, c.tp, c.pp, c.dp, c.ep, c.weight_quant, c.kv_dtype)
    tokens = np.asarray(load.isl + load.osl * cal.kv_held_osl_fraction.value)
    role = RoleColumns(par, c.max_num_seqs, c.max_num_batched_tokens, c.workers, tokens)
    setting = WorkerSetting(m, gpu, cal, gpu_memory_utilization, spec_decode=w.spec_decode)
    dec = worker_arrays(setting, role, lockstep_share(w, load.concurrency, cal))
    ctx = load.isl + load.osl / 2.0
    mix = StepMix(*verify_rows(load, np.maximum(batch, 1.0), ctx), zero, zero, zero)
    t = _steps(m, op_pricer(gpu, pricer), dec, [mix])[0]
    return DecodeRole(t * load.step_multiplier, dec.seq_capacity)
