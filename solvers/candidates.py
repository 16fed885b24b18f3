"""Evaluate the search space of one GPU type into blocks of scored candidates (agg and disagg).

Every candidate is a whole deployment and is predicted by :func:`planner.perf.batch.evaluate_batch`,
the same call ``planner estimate`` makes, so a plan's numbers are ``estimate``'s numbers. A
:class:`Block` holds one (GPU type, mode) slice: the workers it came from, the deployment columns
(replicas, clients) and the :class:`planner.perf.batch.ResultArrays` of its candidates.
Load (docs/capacity.md "Load"): no load -> every worker is swept over the closed-loop client
levels of the space and replicated to fill ``max_gpus``; ``concurrency`` -> the N clients are shared
by the replicas (agg) or decode workers (disagg); ``rate`` -> each worker gets the fewest replicas
that meet the SLO at the rate, found by galloping search (:mod:`solvers.counts`), never one
evaluation per count (agg; disagg worker counts come from :mod:`solvers.rate_pd`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.engines import DEFAULT_ENGINE
from planner.engines.calibration import EnginePolicy
from planner.model.spec import ModelSpec
from planner.perf import memory as memory_batch
from planner.perf.batch import (
    CandidateArrays,
    ResultArrays,
    evaluate_batch,
    kv_tokens_held,
    parallel_arrays,
)
from planner.workload.spec import SpecDecode, Workload, fixed
from solvers.counts import Check, around, count_ladder, fewest_counts
from solvers.space import Mode, SearchSpace, Workers, enumerate_workers

DECODE_CHUNK_TOKENS = 2048
"""max_num_batched_tokens of decode-only workers (they never prefill; the budget only bounds
activations)."""
EVAL_CHUNK = 50_000
"""Most candidates priced in one ``evaluate_batch`` call (bounds the search's peak memory)."""
PARETO_WORKERS = 64
"""Workers (fewest GPUs first) whose larger replica counts a sized plan also predicts
(Pareto front)."""
PERCENTILE_FIELDS: tuple[str, ...] = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True)
class Load:
    """Workload sizes and the load to plan for (at most one of rate and concurrency)."""

    isl: int
    osl: int
    rate_per_s: float | None = None
    concurrency: int | None = None
    backend: str | EnginePolicy = DEFAULT_ENGINE
    """The engine (a name: its packaged constants)."""
    prefix_hit: float = 0.0
    """Share of prompt tokens served from a prefix cache (their prefill is skipped)."""
    spec_decode: SpecDecode | None = None
    """Speculative decoding every candidate runs (None: off)."""

    def workload(self) -> Workload:
        """The planner workload (closed loop unless a rate is given; candidates carry their
        clients)."""
        if self.rate_per_s is not None:
            w = fixed(self.isl, self.osl, rate_per_s=self.rate_per_s)
        else:
            w = fixed(self.isl, self.osl, concurrency=self.concurrency or 1)
        if self.prefix_hit:
            w = w.model_copy(update={"prefix_hit": self.prefix_hit})
        return w.model_copy(update={"spec_decode": self.spec_decode}) if self.spec_decode else w


@dataclass(frozen=True)
class Units:
    """Disaggregated deployments: indices into the prefill / decode worker sets and worker
    counts."""

    p: np.ndarray
    d: np.ndarray
    x: np.ndarray  # prefill workers
    y: np.ndarray  # decode workers


@dataclass(frozen=True)
class Block:
    """Scored candidates of one GPU type and mode (arrays of length ``size``)."""

    mode: Mode
    gpu: GpuSpec
    res: ResultArrays  # predictions of each whole deployment
    concurrency: np.ndarray  # closed-loop clients of the deployment (NaN: open loop at the rate)
    clients: np.ndarray  # per worker (agg) / per decode worker (disagg)
    replicas: np.ndarray  # agg workers (1 for disagg: worker counts are in ``units``)
    workers: Workers | None = None  # agg
    units: Units | None = None  # disagg
    prefill: Workers | None = None
    decode: Workers | None = None
    evaluated: int = 0
    memory_pruned: int = 0
    prefill_gpu: GpuSpec | None = None
    """The prefill workers' GPU type where it differs from ``gpu`` (disagg over two types)."""

    @property
    def size(self) -> int:
        return int(self.res.gpus.size)

    @property
    def pre_gpu(self) -> GpuSpec:
        """The GPU type of the prefill workers (``gpu`` unless the pair mixes types)."""
        return self.prefill_gpu or self.gpu

    @property
    def mixed(self) -> bool:
        """Prefill and decode workers run on two GPU types."""
        return self.prefill_gpu is not None and self.prefill_gpu.key != self.gpu.key

    @property
    def type_key(self) -> str:
        """The GPU type of the block, or its prefill/decode pair (``prefill_key+decode_key``)."""
        return f"{self.pre_gpu.key}+{self.gpu.key}" if self.mixed else self.gpu.key

    @property
    def limit(self) -> np.ndarray:
        """Requests a worker would run if KV memory were unlimited (clients or max_num_seqs)."""
        w = self.workers if self.mode == "agg" else self.decode
        assert w is not None
        seqs = w.max_num_seqs if self.units is None else w.max_num_seqs[self.units.d]
        return np.minimum(self.clients, seqs).astype(float)


def percentile_ms(res: ResultArrays, metric: str, percentile: str) -> np.ndarray:
    """``ttft`` or ``tpot`` at ``mean``/``p50``/``p90``/``p99``, milliseconds."""
    return np.asarray(getattr(res, f"{metric}_{percentile}_s")) * 1e3


def capacity(
    m: ModelSpec,
    gpu: GpuSpec,
    tp: np.ndarray,
    pp: np.ndarray,
    dp: np.ndarray,
    ep: np.ndarray,
    c: CandidateArrays,
    chunk: np.ndarray,
    tokens: float,
    util: np.ndarray,
) -> np.ndarray:
    """Sequences of ``tokens`` one worker of this split holds
    (planner.perf.memory, as evaluate_batch checks)."""
    par = parallel_arrays(gpu, tp, pp, dp, ep, c.weight_quant, c.kv_dtype)
    return memory_batch.seq_capacity(
        m, gpu, par, chunk, c.max_num_seqs, np.full(len(c), float(tokens)), util
    )


def seq_capacity(m: ModelSpec, gpu: GpuSpec, w: Workers, tokens: float) -> np.ndarray:
    """Sequences of ``tokens`` each worker holds."""
    c = CandidateArrays.from_lists(**w.columns())
    return capacity(m, gpu, c.tp, c.pp, c.dp, c.ep, c, c.max_num_batched_tokens, tokens, w.mem_frac)


def fitting_workers(
    m: ModelSpec, gpu: GpuSpec, space: SearchSpace, gi: int, tokens: float, **over: tuple
) -> tuple[Workers, int]:
    """Enumerate workers and prune by memory: (workers holding one sequence of ``tokens``,
    enumerated)."""
    w = enumerate_workers(m, space, gi, gpu.scale_up.domain_size, node_gpus=gpu.node_gpus, **over)
    if w.size == 0:
        return w, 0
    return w.take(seq_capacity(m, gpu, w, tokens) >= 1), w.size


def evaluate(
    m: ModelSpec, gpu: GpuSpec, load: Load, util: np.ndarray, **cols: np.ndarray
) -> ResultArrays:
    """:func:`evaluate_roles` with both roles on ``gpu``."""
    return evaluate_roles(m, gpu, None, load, util, cols)


def evaluate_roles(
    m: ModelSpec,
    gpu: GpuSpec,
    prefill_gpu: GpuSpec | None,
    load: Load,
    util: np.ndarray,
    cols: dict[str, np.ndarray],
) -> ResultArrays:
    """``evaluate_batch`` on candidate columns (see :class:`planner.perf.batch.CandidateArrays`).

    max_num_seqs and the memory fraction reach the serving model only through the engine's slot cap
    min(max_num_seqs, KV capacity) (in a closed loop, only up to its clients per worker) and the fit
    flags, so candidates equal in every other column and in
    those are predicted once and share the answer (each keeps its own KV capacity); since the
    serving
    model treats candidates independently, this equals evaluating each one alone (``planner
    estimate``). ``prefill_gpu``: the prefill workers' GPU type (None: ``gpu``).
    """
    c = CandidateArrays.from_lists(**cols)
    util = np.broadcast_to(np.asarray(util, dtype=float), (len(c),))
    # the engine's slot cap, counted as the serving model counts it (so equal slots mean equal
    # answers)
    dec_cap = capacity(
        m,
        gpu,
        c.tp,
        c.pp,
        c.dp,
        c.ep,
        c,
        c.max_num_batched_tokens,
        float(kv_tokens_held(load.isl, load.osl, load.backend)),
        util,
    )
    pre_cap = capacity(
        m,
        prefill_gpu or gpu,
        c.prefill_tp,
        c.prefill_pp,
        c.prefill_dp,
        c.prefill_ep,
        c,
        c.prefill_max_num_batched_tokens,
        load.isl + 1,
        util,
    )
    slots = np.maximum(np.minimum(c.max_num_seqs, dec_cap), 1.0)
    # a closed loop never fills more slots than its clients per worker: slots beyond them change
    # nothing (no admission wait either way), so they share one prediction
    per_worker = c.concurrency / np.maximum(c.workers, 1.0)
    slots = np.where(c.own_concurrency, np.minimum(slots, per_worker), slots)
    fields = [f for f in CandidateArrays.__dataclass_fields__ if f != "max_num_seqs"]
    key = np.stack(
        [np.nan_to_num(getattr(c, f), nan=-1.0) for f in fields]
        + [slots, dec_cap >= 1, ~c.disagg | (pre_cap >= 1)],
        axis=1,
    )
    first, inv = unique_rows(key)
    out: dict[str, np.ndarray] = {}
    # one call per (pp, prefill pp): the op graph prices pipeline hops at the batch's largest pp
    # (pp = 1 has no hops, so it joins the smallest pp > 1)
    # and at most EVAL_CHUNK candidates per call, so the pricing's temporaries stay bounded
    hops = np.stack([_hop_group(c.pp[first]), _hop_group(c.prefill_pp[first])], axis=1)
    for _, group in _groups(hops):
        for rows in np.array_split(group, -(-group.size // EVAL_CHUNK)):
            idx = first[rows]
            sub = CandidateArrays(
                **{f: getattr(c, f)[idx] for f in CandidateArrays.__dataclass_fields__}
            )
            r = evaluate_batch(
                m,
                gpu,
                sub,
                load.workload(),
                backend=load.backend,
                gpu_memory_utilization=util[idx],
                prefill_gpu=prefill_gpu,
            )
            for f in ResultArrays.__dataclass_fields__:
                v = getattr(r, f)
                out.setdefault(f, np.empty(first.size, dtype=v.dtype))[rows] = v
    res = {f: v[inv.ravel()] for f, v in out.items()}
    return ResultArrays(**{**res, "seq_capacity": dec_cap})


def unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_index=True, return_inverse=True)[1:]`` (rows in the same
    lexicographic order), computed on one int64 code per row: each column is replaced by its rank
    among the column's distinct values and the ranks are combined in mixed radix. Sorting one
    integer per row is ~10x faster than sorting rows of floats; falls back to numpy when the
    ranks do not fit in 62 bits."""
    codes = np.zeros(key.shape[0], dtype=np.int64)
    room = 1
    for col in key.T:
        values, rank = np.unique(col, return_inverse=True)
        room *= values.size
        if room >= 1 << 62:
            _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
            return first, inv.ravel()
        codes = codes * values.size + rank.ravel()
    _, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    return first, inv.ravel()


def _hop_group(pp: np.ndarray) -> np.ndarray:
    """Pipeline sizes with pp = 1 folded into the smallest pp > 1
    (both price the same alone or together)."""
    deeper = pp[pp > 1]
    return np.where(pp > 1, pp, deeper.min() if deeper.size else 1.0)


def _groups(keys: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(key, row indices) of each distinct row of ``keys``."""
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    return [(u, np.flatnonzero(inv == k)) for k, u in enumerate(uniq)]


Slo = tuple[float, float, str]
"""(TTFT ms, TPOT ms, percentile) a deployment must meet."""


Edge = Callable[["Block"], tuple[np.ndarray, np.ndarray]]
"""Per candidate of a block, the (TTFT, TPOT) factors from the prediction to the value the SLO is
checked at (the upper edge of the prediction band the plan requires; the plan's own feasibility
test, so a count the search sizes is a count the plan accepts)."""


def meets(
    res: ResultArrays,
    slo: Slo,
    tpot_only: bool = False,
    factors: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Deployments predicted stable, fitting and within the SLO (``tpot_only``: TPOT alone), each
    metric times its ``factors`` (the band edge; none: the point prediction)."""
    f_ttft, f_tpot = factors if factors is not None else (1.0, 1.0)
    ok = res.feasible & (percentile_ms(res, "tpot", slo[2]) * f_tpot <= slo[1])
    return ok if tpot_only else ok & (percentile_ms(res, "ttft", slo[2]) * f_ttft <= slo[0])


def block_meets(b: Block, slo: Slo, edge: Edge | None, tpot_only: bool = False) -> np.ndarray:
    """:func:`meets` for the candidates of ``b``, at the edge the plan checks (``edge``)."""
    return meets(b.res, slo, tpot_only, edge(b) if edge is not None else None)


def widest_slots(m: ModelSpec, gpu: GpuSpec, w: Workers, load: Load) -> Workers:
    """Per (split, weight dtype, KV dtype, chunk) the worker with the most engine slots.

    At an open-loop rate the slot cap min(max_num_seqs, KV capacity) only bounds the batch and the
    queue (saturation), so more slots is never worse; the others are dropped before pricing.
    """
    if w.size == 0:
        return w
    slots = np.minimum(
        w.max_num_seqs,
        seq_capacity(m, gpu, w, float(kv_tokens_held(load.isl, load.osl, load.backend))),
    )
    key = np.stack([w.tp, w.pp, w.dp, w.ep, w.quant, w.kv, w.chunk], axis=1)
    order = np.lexsort((w.max_num_seqs, w.mem_frac, -slots, *key.T[::-1]))
    k = key[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = np.any(k[1:] != k[:-1], axis=1)
    return w.take(np.sort(order[first]))


@dataclass
class Counter:
    """Candidates priced so far (the search's work, reported as ``candidates_evaluated``)."""

    n: int = 0


def _agg_check(
    m: ModelSpec,
    gpu: GpuSpec,
    w: Workers,
    load: Load,
    slo: Slo,
    seen: Counter,
    edge: Edge | None,
) -> Check:
    conc = np.nan if load.concurrency is None else float(load.concurrency)

    def check(i: np.ndarray, n: np.ndarray) -> np.ndarray:
        ws = w.take(i)
        seen.n += int(i.size)
        res = evaluate(
            m,
            gpu,
            load,
            ws.mem_frac,
            **ws.columns(),
            concurrency=np.full(i.size, conc),
            workers=n.astype(float),
        )
        reps, clients = n.astype(float), np.full(i.size, conc)
        b = Block("agg", gpu, res, clients, clients / reps, reps, workers=ws)
        return block_meets(b, slo, edge)

    return check


def _agg_sized(
    m: ModelSpec,
    gpu: GpuSpec,
    w: Workers,
    space: SearchSpace,
    load: Load,
    slo: Slo,
    seen: Counter,
    edge: Edge | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(worker, replicas) at a rate or a fixed concurrency.

    Replicas share the load evenly, so a worker meets the SLO from some replica count on: per
    worker that fewest count by galloping search (log2 of the answer checks, never one per count;
    workers that cannot beat the fewest GPUs found keep a feasible count, not their fewest). The
    ``PARETO_WORKERS`` workers needing the fewest GPUs also get a few counts above it (the front's
    faster points; with a fixed concurrency the count ladder too); workers that never meet the SLO
    are kept at their lightest load (for the infeasibility diagnosis).
    """
    n_max = space.max_gpus // w.gpus_per_worker
    if load.concurrency is not None:
        n_max = np.minimum(n_max, load.concurrency)
    n = fewest_counts(
        n_max, _agg_check(m, gpu, w, load, slo, seen, edge), dense=1, weight=w.gpus_per_worker
    )
    feas = np.flatnonzero(n > 0)
    top = feas[np.argsort((n * w.gpus_per_worker)[feas], kind="stable")[:PARETO_WORKERS]]
    ti, tr = around(n[top], n_max[top])
    idx, reps = [feas, top[ti], np.flatnonzero(n == 0)], [n[feas], tr, n_max[n == 0]]
    if load.concurrency is not None:
        ladder = count_ladder(int(n_max.max(initial=1)))
        li, lr = np.repeat(top, ladder.size), np.tile(ladder, top.size)
        keep = lr <= n_max[li]
        idx, reps = idx + [li[keep]], reps + [lr[keep]]
    pairs = np.unique(np.stack([np.concatenate(idx), np.concatenate(reps)], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _agg_levels(w: Workers, space: SearchSpace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(worker index, deployment clients, replicas) of every closed-loop operating point
    (no load)."""
    gpw = w.gpus_per_worker
    levels = np.array(space.concurrency_per_worker)
    idx = np.repeat(np.arange(w.size), levels.size)
    clients = np.tile(levels, w.size)
    keep = clients <= w.max_num_seqs[idx]  # more clients than slots only wait outside the engine
    idx, clients = idx[keep], clients[keep]
    reps = np.maximum(space.max_gpus // gpw[idx], 1)
    return idx, (clients * reps).astype(float), reps


def agg_block(
    m: ModelSpec,
    gpu: GpuSpec,
    gi: int,
    space: SearchSpace,
    load: Load,
    slo: Slo,
    edge: Edge | None = None,
) -> Block | None:
    """Aggregated candidates of one GPU type; at a load, each worker sized to the fewest replicas
    meeting ``slo`` at ``edge`` (the plan's own test)."""
    w, n_enum = fitting_workers(m, gpu, space, gi, load.isl + load.osl)
    if w.size == 0:
        return None
    seen, pruned = Counter(), n_enum - w.size
    if load.concurrency is None and load.rate_per_s is None:
        idx, conc, reps = _agg_levels(w, space)
    else:
        if load.rate_per_s is not None:
            w = widest_slots(m, gpu, w, load)
        idx, reps = _agg_sized(m, gpu, w, space, load, slo, seen, edge)
        c = np.nan if load.concurrency is None else float(load.concurrency)
        conc = np.full(idx.size, c)
    ws = w.take(idx)
    res = evaluate(
        m, gpu, load, ws.mem_frac, **ws.columns(), concurrency=conc, workers=reps.astype(float)
    )
    return Block(
        "agg",
        gpu,
        res,
        conc,
        conc / reps,
        reps,
        workers=ws,
        evaluated=seen.n + int(idx.size),
        memory_pruned=pruned,
    )
