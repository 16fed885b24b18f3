"""Evaluate the search space of one GPU type into blocks of scored candidates (agg and disagg).

A :class:`Block` holds one (GPU type, mode) slice: the workers it came from and flat arrays of the
candidates' metrics and sizes, so the planner can filter, rank and describe them without loops.
Load semantics (DESIGN.md, issue 6): no load -> every worker is swept over the closed-loop client
levels of the space and replicated to fill ``max_gpus``; ``concurrency`` -> the N clients are split
over the replicas (agg) or decode workers (disagg); ``rate`` -> each operating point is replicated
to serve the rate (agg here; disagg worker counts come from the MILP in :mod:`solvers.pd_milp`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hardware.spec import GpuSpec
from planner.model_spec import ModelSpec
from solvers.disagg import PhaseSet, Units, build_units
from solvers.memory_vec import memory_arrays, shard_terms
from solvers.perf import Engine, LatencyArrays, agg_metrics, decode_metrics, prefill_metrics
from solvers.space import Mode, SearchSpace, Workers, enumerate_workers

DECODE_CHUNK_TOKENS = 2048
"""max_num_batched_tokens of decode-only workers (they never prefill; the budget only bounds activations)."""


@dataclass(frozen=True)
class Load:
    """Workload sizes and the load to plan for (at most one of rate and concurrency)."""

    isl: int
    osl: int
    rate_per_s: float | None = None
    concurrency: int | None = None


@dataclass(frozen=True)
class Block:
    """Scored candidates of one GPU type and mode."""

    mode: Mode
    gpu: GpuSpec
    metrics: LatencyArrays  # per unit (agg: one worker)
    clients: np.ndarray  # per worker (agg) / per decode worker (disagg)
    unit_gpus: np.ndarray
    replicas: np.ndarray
    workers: Workers | None = None  # agg
    units: Units | None = None  # disagg
    prefill: PhaseSet | None = None
    decode: PhaseSet | None = None
    evaluated: int = 0
    memory_pruned: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.unit_gpus.size)

    @property
    def total_gpus(self) -> np.ndarray:
        return self.unit_gpus * self.replicas


def fitting_workers(m: ModelSpec, gpu: GpuSpec, space: SearchSpace, gi: int, isl: int, osl: int,
                    **over: tuple) -> tuple[Workers, np.ndarray, np.ndarray, int]:
    """Enumerate workers, prune by memory: (fitting workers, KV concurrency cap, KV bytes/token, enumerated)."""
    w = enumerate_workers(m, space, gi, gpu.scale_up.domain_size, **over)
    if w.size == 0:
        return w, np.zeros(0, int), np.zeros(0), 0
    terms = shard_terms(m, w, isl, osl)
    mem = memory_arrays(np.full(w.size, gpu.memory_bytes), w, terms)
    keep = mem.fits
    return w.take(keep), mem.max_concurrency[keep], terms.transfer_kv_per_token[keep], w.size


def _agg_levels(w: Workers, space: SearchSpace, load: Load) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(worker index, clients per worker, replicas) of every agg operating point."""
    gpw = w.gpus_per_worker
    if load.concurrency is None:
        levels = np.array(space.concurrency_per_worker)
        idx = np.repeat(np.arange(w.size), levels.size)
        clients = np.tile(levels, w.size)
        return idx, clients, np.maximum(space.max_gpus // gpw[idx], 1)
    reps = np.arange(1, space.max_gpus + 1)
    idx = np.repeat(np.arange(w.size), reps.size)
    r = np.tile(reps, w.size)
    keep = (r * gpw[idx] <= space.max_gpus) & (r <= load.concurrency)
    idx, r = idx[keep], r[keep]
    return idx, np.ceil(load.concurrency / r).astype(int), r


def agg_block(m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, eng: Engine, load: Load) -> Block | None:
    """Aggregated candidates of one GPU type."""
    w, cap, _, n_enum = fitting_workers(m, gpu, space, gi, load.isl, load.osl)
    if w.size == 0:
        return None
    idx, clients, reps = _agg_levels(w, space, load)
    ws = w.take(idx)
    met = agg_metrics(m, gpu, eng, ws, cap[idx], clients, load.isl, load.osl)
    if load.rate_per_s is not None:
        reps = np.ceil(load.rate_per_s / np.maximum(met.requests_per_s, 1e-12)).astype(int)
    return Block("agg", gpu, met, clients, ws.gpus_per_worker, reps, workers=ws,
                 evaluated=int(idx.size), memory_pruned=n_enum - w.size)


def phase_sets(m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, eng: Engine, load: Load,
               decode_clients: np.ndarray) -> tuple[PhaseSet, PhaseSet, int] | None:
    """Memory-feasible prefill workers and decode operating points of one GPU type."""
    kinds = tuple(k for k in space.kv_dtypes)
    pw, _, pkv, n_p = fitting_workers(m, gpu, space, gi, load.isl, load.osl, max_num_seqs=(min(space.max_num_seqs),))
    dspace = space.model_copy(update={"chunk_tokens": (max(*space.max_num_seqs, DECODE_CHUNK_TOKENS),), "mem_fractions": (max(space.mem_fractions),)})
    dw, dcap, dkv, n_d = fitting_workers(m, gpu, dspace, gi, load.isl, load.osl, kv_dtypes=kinds)
    if pw.size == 0 or dw.size == 0:
        return None
    pre = PhaseSet(pw, np.zeros(pw.size, int), pkv, prefill=prefill_metrics(m, gpu, eng, pw, load.isl))
    idx = np.repeat(np.arange(dw.size), decode_clients.size)
    cl = np.tile(decode_clients, dw.size)
    dws = dw.take(idx)
    dec = PhaseSet(dws, cl, dkv[idx], decode=decode_metrics(m, gpu, eng, dws, dcap[idx], cl, load.isl, load.osl))
    return pre, dec, n_p + n_d


def disagg_block(m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, eng: Engine, load: Load,
                 tpot_slo_ms: float) -> Block | None:
    """Disaggregated xPyD candidates of one GPU type (no load, or a fixed concurrency)."""
    levels = np.array(space.concurrency_per_worker)
    if load.concurrency is not None:
        levels = np.unique(np.ceil(load.concurrency / np.arange(1, space.max_gpus + 1)).astype(int))
    sets = phase_sets(m, gpu, gi, space, eng, load, levels)
    if sets is None:
        return None
    pre, dec, n_enum = sets
    units = build_units(gpu, eng, pre, dec, tpot_slo_ms, space.max_gpus, load.isl, load.osl,
                        total_clients=load.concurrency)
    ug = units.x * pre.workers.gpus_per_worker[units.p] + units.y * dec.workers.gpus_per_worker[units.d]
    reps = np.maximum(space.max_gpus // np.maximum(ug, 1), 1) if load.concurrency is None else np.ones_like(ug)
    return Block("disagg", gpu, units.metrics, dec.clients[units.d], ug, reps, units=units, prefill=pre,
                 decode=dec, evaluated=int(units.size + pre.workers.size + dec.workers.size),
                 memory_pruned=n_enum - pre.workers.size - dec.workers.size // max(levels.size, 1))
