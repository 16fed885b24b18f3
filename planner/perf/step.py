"""Price one step: ops from :mod:`planner.perf.opgraph` through an op pricer, plus the engine
overhead.

The pricer is a narrow protocol (``OpPricer.price_ops(ops)``: seconds per instance and provenance
of each op) so the source of kernel times can change without touching the op graph:
:class:`RooflinePricer` is the built-in fallback (time = max(FLOPs / (peak·eff_c),
bytes / (BW·eff_m)) + launches; docs/architecture.md "Pricing", tier 3);
:mod:`planner.perf.pricer` plugs in ``kernels_db``. Communication is kernels_db's alpha-beta
(``kernels_db.comm``): latency + bytes·algo_factor / (link bandwidth·eff), over the scale-up link
inside the domain and over the NIC beyond it; the roofline pricer uses its unfitted defaults.
``price_steps`` prices several steps in one pricer call (``BlockPricer``: the steps' rows end to
end, each step's provenance kept apart), equal to ``price_step`` of each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hardware.spec import GpuSpec
from kernels_db import fitted
from kernels_db.lookup import KernelDB, StepPricer
from planner.model.spec import ModelSpec
from planner.perf.opgraph import OP_KINDS, Op, OpKind, ParallelArrays, StepMix, step_ops


class OpPricer(Protocol):
    """Anything that turns the ops of a step into seconds per instance (shape (K,)) and says
    where from (``kernels_db.lookup.StepPricer``: one kernels_db lookup per op family)."""

    def price_ops(self, ops: Sequence[Op]) -> list[tuple[np.ndarray, str]]: ...


class BlockPricer(Protocol):
    """An ``OpPricer`` that also prices several steps tiled in one call, each step's provenance
    kept apart (``kernels_db.lookup.StepPricer.price_ops`` with ``blocks``)."""

    def price_ops(self, ops: Sequence[Op], blocks: int = 1) -> list[tuple[np.ndarray, str]]: ...


@dataclass(frozen=True)
class Efficiency:
    """Achieved fraction of peak compute / memory bandwidth and per-kernel launch cost."""

    compute: float
    memory: float
    launch_s: float


def _efficiency(family: str) -> Efficiency:
    prm = fitted.DEFAULT_PARAMS[family]
    return Efficiency(prm.compute_eff, prm.memory_eff, prm.launch_s)


DEFAULT_EFFICIENCY: dict[str, Efficiency] = {
    # one definition: kernels_db's unfitted defaults (kernels_db.fitted.DEFAULT_PARAMS, sources
    # there); elementwise kernels are memory copies
    "gemm": _efficiency("gemm"),
    "attention_prefill": _efficiency("attention_prefill"),
    "attention_decode": _efficiency("attention_decode"),
    "moe": _efficiency("moe"),
    "elementwise": _efficiency("memcpy"),
}
ATTENTION_DTYPE = "bf16"
"""Attention math runs in 16-bit (fp8 KV is dequantized in the kernel)."""


class RooflinePricer:
    """Roofline with default efficiencies (provenance 'roofline')."""

    def __init__(self, gpu: GpuSpec, efficiency: dict[str, Efficiency] | None = None) -> None:
        self.gpu = gpu
        self.eff = efficiency or DEFAULT_EFFICIENCY
        self.attn_peak = gpu.peak_flops(ATTENTION_DTYPE)
        # collectives: kernels_db's alpha-beta with its unfitted defaults (no tables, no fit)
        self.comm = StepPricer[Op](KernelDB(gpu), lambda op: np.zeros(np.shape(op.nbytes)))

    def price(self, op: Op) -> tuple[np.ndarray, str]:
        if op.family == "comm":
            return self.comm_time(op), "alpha-beta (uncalibrated)"
        e = self.eff[op.family]
        peak = op.peak_flops_per_s if op.family in ("gemm", "moe") else self.attn_peak
        compute = op.flops / (np.maximum(peak, 1.0) * e.compute)
        memory = op.nbytes / (self.gpu.hbm_bandwidth_bytes_per_s * e.memory)
        busy = (op.flops > 0) | (op.nbytes > 0)
        return np.maximum(
            compute, memory
        ) + e.launch_s * op.kernels * busy, "roofline (uncalibrated)"

    def price_ops(self, ops: Sequence[Op]) -> list[tuple[np.ndarray, str]]:
        """``price`` of every op."""
        return [self.price(op) for op in ops]

    def comm_time(self, op: Op) -> np.ndarray:
        """alpha-beta time of one collective with kernels_db's unfitted defaults
        (``kernels_db.comm.default_params``); zero where a single GPU is involved or nothing
        moves."""
        t = self.comm.price(op)[0]
        n = np.asarray(op.n_gpus, dtype=float) * np.ones_like(op.nbytes)
        return np.where((n > 1) & (op.nbytes > 0), t, 0.0)


@dataclass(frozen=True)
class StepCost:
    """Time of one step (K candidates) and its split by op kind."""

    time_s: np.ndarray
    by_kind_s: np.ndarray  # shape (len(OP_KINDS) + 1, K); last row = engine overhead
    provenance: tuple[tuple[str, str], ...]  # (op name, where its time came from)
    by_source_s: tuple[tuple[str, np.ndarray], ...] = ()
    """Kernel seconds (before ``kernel_scale``) per provenance tag, tags in order of first use."""


KINDS_WITH_OVERHEAD: tuple[str, ...] = (*OP_KINDS, "overhead")
_KIND_INDEX: dict[OpKind, int] = {k: i for i, k in enumerate(OP_KINDS)}


def engine_overhead(
    p: ParallelArrays,
    s: StepMix,
    overhead_s: np.ndarray | float,
    seq_overhead_s: np.ndarray | float,
) -> np.ndarray:
    """CPU time of one step not hidden behind the GPU (s): a fixed part plus a part per running
    request of one scheduler (each attention-DP rank schedules its own share of the batch)."""
    return np.asarray(overhead_s + seq_overhead_s * s.decode_reqs / np.maximum(p.dp, 1.0))


def price_step(
    m: ModelSpec,
    p: ParallelArrays,
    s: StepMix,
    pricer: OpPricer,
    *,
    kernel_scale: np.ndarray | float = 1.0,
    overhead_s: np.ndarray | float = 0.0,
    seq_overhead_s: np.ndarray | float = 0.0,
) -> StepCost:
    """Sum the priced ops of one step; ``kernel_scale``, ``overhead_s`` and ``seq_overhead_s`` are
    the engine calibration (``engine_overhead``)."""
    ops = step_ops(m, p, s)
    return _step_cost(ops, pricer.price_ops(ops), p, s, kernel_scale, overhead_s, seq_overhead_s)


def price_steps(
    m: ModelSpec,
    steps: Sequence[tuple[ParallelArrays, StepMix]],
    pricer: BlockPricer,
    *,
    kernel_scale: np.ndarray | float = 1.0,
    overhead_s: np.ndarray | float = 0.0,
    seq_overhead_s: np.ndarray | float = 0.0,
) -> list[StepCost]:
    """``price_step`` of each (parallelism, mix) of ``steps`` (K candidates each, the engine
    calibration the same for all), equal to it, in one pricer call: the steps' rows end to end,
    each step's provenance kept apart (``BlockPricer``). The op graph of a step depends on its
    rows only, except for the pipeline hops (``opgraph.pp_send_op`` counts the largest pp of the
    rows): steps whose largest pp differ, or whose candidate counts differ, are priced one by
    one."""
    if (
        len(steps) == 1
        or len({float(np.max(p.pp)) for p, _ in steps}) > 1
        or len({np.shape(s.decode_reqs)[0] for _, s in steps}) > 1
    ):
        return [
            price_step(
                m,
                p,
                s,
                pricer,
                kernel_scale=kernel_scale,
                overhead_s=overhead_s,
                seq_overhead_s=seq_overhead_s,
            )
            for p, s in steps
        ]
    pars, mixes = [p for p, _ in steps], [s for _, s in steps]
    par = ParallelArrays.concat(pars)
    mix = StepMix.concat(mixes)
    ops = step_ops(m, par, mix)
    priced = pricer.price_ops(ops, blocks=len(steps))
    n = len(ops)
    return [
        _step_cost(ops, priced[i * n : (i + 1) * n], p, s, kernel_scale, overhead_s, seq_overhead_s)
        for i, (p, s) in enumerate(steps)
    ]


def _step_cost(
    ops: Sequence[Op],
    priced: Sequence[tuple[np.ndarray, str]],
    p: ParallelArrays,
    s: StepMix,
    kernel_scale: np.ndarray | float,
    overhead_s: np.ndarray | float,
    seq_overhead_s: np.ndarray | float,
) -> StepCost:
    """``price_step`` of ``ops`` priced as ``priced`` (seconds per instance, provenance)."""
    kinds = np.zeros((len(KINDS_WITH_OVERHEAD), np.shape(s.decode_reqs)[0]))
    prov: dict[str, str] = {}
    by_source: dict[str, np.ndarray] = {}
    for op, (t, src) in zip(ops, priced, strict=True):
        step_s = t * op.count
        kinds[_KIND_INDEX[op.kind]] += step_s
        prov.setdefault(op.name, src)
        by_source[src] = by_source[src] + step_s if src in by_source else step_s
    kinds[:-1] *= kernel_scale
    kinds[-1] = engine_overhead(p, s, overhead_s, seq_overhead_s)
    return StepCost(kinds.sum(axis=0), kinds, tuple(sorted(prov.items())), tuple(by_source.items()))


def step_time(
    m: ModelSpec,
    p: ParallelArrays,
    s: StepMix,
    pricer: OpPricer,
    *,
    kernel_scale: np.ndarray | float = 1.0,
    overhead_s: np.ndarray | float = 0.0,
    seq_overhead_s: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Seconds of one step (the fast path: no breakdown kept)."""
    total = np.zeros(np.shape(s.decode_reqs)[0])
    ops = step_ops(m, p, s)
    for op, (t, _) in zip(ops, pricer.price_ops(ops), strict=True):
        total += t * op.count
    return total * kernel_scale + engine_overhead(p, s, overhead_s, seq_overhead_s)
