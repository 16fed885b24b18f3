"""A worker of a batch of candidate configs (K candidates, one role): its KV capacity and the
engine constants its steps are priced with, and the launch settings a replayed measurement
recorded (``RecordedLaunch``). ``planner.perf.batch`` and ``planner.perf.roles`` build every
worker here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from hardware.spec import GpuSpec
from planner.engines import PromptHolds
from planner.engines.calibration import EngineCalibration
from planner.engines.kv_pool import default_pool_util
from planner.model.spec import ModelSpec
from planner.perf import memory as memory_batch
from planner.perf import spec_decode
from planner.perf.opgraph import ParallelArrays
from planner.perf.serving import WorkerArrays
from planner.workload.spec import SpecDecode

Constants = Mapping[str, np.ndarray]
"""Per-candidate values (shape (K,)) of fitted engine constants, by ``EngineCalibration`` field
name; they replace the calibration's single value (the engine-constant fit prices every grid value
of a constant in one call)."""


def constant(
    cal: EngineCalibration, name: str, k: int, constants: Constants | None = None
) -> np.ndarray:
    """The fitted constant ``name`` for K candidates: ``constants[name]`` when given, else the
    calibration's value."""
    if constants is not None and name in constants:
        return np.broadcast_to(np.asarray(constants[name], dtype=float), (k,)).astype(float)
    return np.full(k, float(getattr(cal, name).value))


@dataclass(frozen=True)
class RecordedLaunch:
    """Launch settings a measured deployment recorded, for replaying it (``planner validate``);
    a plan leaves every one unset. Arrays have one entry per candidate, shape (K,)."""

    kv_pool: np.ndarray | None = None
    """``planner.engines.kv_pool.KvPool`` whose default sizes each worker's KV pool (a launch
    measured at its engine's default); None: ``gpu_memory_utilization`` of the device, as the
    planner's plans set it."""
    pool_flag: np.ndarray | None = None
    """The engine's own memory flag where the launch recorded it, NaN elsewhere
    (``planner.engines.kv_pool.default_pool_util``)."""
    holds: PromptHolds | None = None
    """The engine scheduler's prompt holds the launch enabled (aggregated workers only;
    ``serving.WorkerArrays.holds``)."""
    decode_routers: np.ndarray | None = None
    """Slot-blind round-robin routers that place requests on a disaggregated deployment's decode
    workers, NaN where they fill free slots (``serving.routed_running``)."""
    constants: Constants | None = None
    """Per-candidate values of fitted engine constants (``Constants``)."""


NOT_RECORDED = RecordedLaunch()
"""A plan's launch: nothing recorded, every setting the planner's own."""


@dataclass(frozen=True)
class WorkerSetting:
    """What every worker of a batch of candidates shares: the model, the GPU, the engine's
    calibration, the memory fraction (one value, or one per candidate) and the recorded launch."""

    m: ModelSpec
    gpu: GpuSpec
    cal: EngineCalibration
    util: float | np.ndarray
    recorded: RecordedLaunch = NOT_RECORDED
    spec_decode: SpecDecode | None = None
    """Speculative decoding the workers run: its draft's weights and KV share the memory."""


@dataclass(frozen=True)
class RoleColumns:
    """One role's candidate columns (K candidates): parallelism, slots, chunk, workers and the KV
    tokens one of its sequences holds."""

    par: ParallelArrays
    seqs: np.ndarray
    chunk: np.ndarray
    workers: np.ndarray
    tokens: np.ndarray


def worker_arrays(
    s: WorkerSetting,
    role: RoleColumns,
    burst: np.ndarray,
    lockstep: bool = False,
    holds: PromptHolds | None = None,
    overlap: bool = False,
) -> WorkerArrays:
    """One role's ``WorkerArrays``: its KV capacity (at the recorded pool where one is given) and
    the calibration's kernel scale and step overhead; ``overlap``: its engine overlaps scheduling
    with the running step (``Engine.overlap_scheduler``)."""
    util, rec = s.util, s.recorded
    if rec.kv_pool is not None:
        util = default_pool_util(
            rec.kv_pool, s.m, s.gpu, role.par, role.chunk, role.seqs, util, rec.pool_flag
        )
    if s.spec_decode is not None:
        cap = spec_decode.seq_capacity(
            s.m, s.gpu, role.par, (role.chunk, role.seqs, role.tokens), util, s.spec_decode
        )
    else:
        cap = memory_batch.seq_capacity(
            s.m, s.gpu, role.par, role.chunk, role.seqs, role.tokens, util
        )
    k = role.seqs.shape[0]
    return WorkerArrays(
        role.par,
        role.seqs,
        role.chunk,
        cap,
        constant(s.cal, "kernel_scale", k, rec.constants),
        constant(s.cal, "step_overhead_s", k, rec.constants),
        role.workers,
        burst,
        np.full(k, lockstep) & np.isfinite(burst),
        np.full(k, True) if overlap else None,
        holds,
    )


def prefill_kernels(
    pre: WorkerArrays, cal: EngineCalibration, k: int, constants: Constants | None = None
) -> WorkerArrays:
    """A disaggregated prefill worker's kernel time: ``kernel_scale`` times
    ``disagg_prefill_kernel_scale`` (1 in the packaged constants; see ``EngineCalibration``)."""
    role = constant(cal, "disagg_prefill_kernel_scale", k, constants)
    return replace(pre, kernel_scale=pre.kernel_scale * role)
