"""Disaggregated (xPyD) candidates: prune each role to its front, pair them with worker counts.

Each role is first ranked on its own with :mod:`planner.perf.roles` (priced exactly as the serving
model prices it): prefill workers by (capacity per GPU, time of one prompt alone), decode operating
points (worker, clients) by (tokens/s per GPU, tokens/s per user) within the TPOT SLO, per
(weight dtype, KV dtype, GPUs per worker). The fronts are paired into deployments of x prefill and
y decode workers of the same dtypes within the GPU budget, and every deployment is predicted whole
by :func:`planner.perf.batch.evaluate_batch` (closed loop of N = y x clients per decode worker, or
the requested N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.model.spec import ModelSpec
from planner.perf.batch import CandidateArrays
from planner.perf.roles import DecodeRole, PrefillRole, decode_role, prefill_role
from solvers.candidates import (
    DECODE_CHUNK_TOKENS,
    Block,
    Load,
    Units,
    evaluate_roles,
    fitting_workers,
)
from solvers.counts import DENSE_COUNTS, count_ladder
from solvers.pareto import group_pareto
from solvers.space import SearchSpace, Workers

PREFILL_WINDOW = 2.0
"""Prefill worker counts tried with N clients: within this factor of the analytical need."""


FREE_SIZE_BUDGET = 256
"""GPU budget from which a no-load plan prunes each role over all worker sizes at once: 16
prefill plus 16 decode workers of 8 GPUs fit, so the budget rarely decides which sizes pair
(below it, small budgets keep every size's front: a smaller worker may be the only one that
fits)."""


@dataclass(frozen=True)
class PhaseSets:
    """Memory-feasible prefill workers and decode operating points, with role times; the prefill
    workers on ``prefill_gpu`` (the decode workers' type, or another)."""

    pre: Workers
    pre_role: PrefillRole
    dec: Workers  # one entry per (decode worker, clients) point
    dec_clients: np.ndarray
    dec_role: DecodeRole
    enumerated: int
    pruned: int
    prefill_gpu: GpuSpec


@dataclass(frozen=True)
class PrefillSet:
    """Memory-feasible prefill workers of one GPU type with their role times (priced once per
    type; a P/D pair of two types combines one type's prefill set with another's decode set)."""

    gpu: GpuSpec
    pre: Workers
    role: PrefillRole
    enumerated: int
    pruned: int


@dataclass(frozen=True)
class DecodeSet:
    """Decode operating points (worker, clients) of one GPU type with their role times."""

    gpu: GpuSpec
    dec: Workers
    clients: np.ndarray
    role: DecodeRole
    enumerated: int
    pruned: int


def dtype_key(w: Workers) -> np.ndarray:
    return (w.quant * 10 + w.kv) * 1000 + w.gpus_per_worker


def prefill_set(
    m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, load: Load
) -> PrefillSet | None:
    """Prefill workers of ``gpu`` (one max_num_seqs, largest memory fraction), or None when none
    holds a prompt."""
    pspace = space.model_copy(update={"mem_fractions": (max(space.mem_fractions),)})
    pw, n_p = fitting_workers(
        m, gpu, pspace, gi, load.isl + 1, max_num_seqs=(min(space.max_num_seqs),)
    )
    if pw.size == 0:
        return None
    pc = CandidateArrays.from_lists(**pw.columns(), **pw.columns("prefill_"))
    role = prefill_role(
        m, gpu, pc, load.workload(), backend=load.backend, gpu_memory_utilization=pw.mem_frac
    )
    return PrefillSet(gpu, pw, role, n_p, n_p - pw.size)


def decode_set(
    m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, load: Load, decode_clients: np.ndarray
) -> DecodeSet | None:
    """Decode points of ``gpu`` at ``decode_clients`` per worker, or None when no worker fits."""
    dspace = space.model_copy(
        update={"chunk_tokens": (max(*space.max_num_seqs, DECODE_CHUNK_TOKENS),)}
    )
    dw, n_d = fitting_workers(m, gpu, dspace, gi, load.isl + load.osl)
    if dw.size == 0:
        return None
    idx = np.repeat(np.arange(dw.size), decode_clients.size)
    cl = np.tile(decode_clients, dw.size).astype(float)
    dws = dw.take(idx)
    dc = CandidateArrays.from_lists(**dws.columns())
    batch = np.minimum(cl, dws.max_num_seqs)
    role = decode_role(
        m,
        gpu,
        dc,
        load.workload(),
        batch,
        backend=load.backend,
        gpu_memory_utilization=dws.mem_frac,
    )
    return DecodeSet(gpu, dws, cl, role, n_d, n_d - dw.size)


def combine(pre: PrefillSet | None, dec: DecodeSet | None) -> PhaseSets | None:
    """The P/D search sets of prefill workers ``pre`` and decode points ``dec`` (one GPU type or
    two), or None when either role has no worker."""
    if pre is None or dec is None or pre.pre.size == 0 or dec.dec.size == 0:
        return None
    n, pruned = pre.enumerated + dec.enumerated, pre.pruned + dec.pruned
    if pre.gpu.key != dec.gpu.key:
        dec = at_prefill_fraction(pre, dec)
        if dec.dec.size == 0:
            return None
    return PhaseSets(pre.pre, pre.role, dec.dec, dec.clients, dec.role, n, pruned, pre.gpu)


def _take(dec: DecodeSet, keep: np.ndarray) -> DecodeSet:
    role = DecodeRole(dec.role.step_s[keep], dec.role.seq_capacity[keep])
    return DecodeSet(dec.gpu, dec.dec.take(keep), dec.clients[keep], role, dec.enumerated, 0)


def at_prefill_fraction(pre: PrefillSet, dec: DecodeSet) -> DecodeSet:
    """The decode points of a pair of two GPU types at the prefill workers' memory fraction: the
    serving model runs both roles at the decode point's fraction (one engine setting), and the
    prefill workers were kept at the largest, which on another type says nothing about a
    smaller one."""
    return _take(dec, np.flatnonzero(dec.dec.mem_frac == np.max(pre.pre.mem_frac)))


def _beaten(keys: np.ndarray, x: np.ndarray, y: np.ndarray, n_rival: int) -> np.ndarray:
    """Of the points after the first ``n_rival`` (the rival type's, listed first so a tie goes to
    it), those off their group's front of (x, y)."""
    return ~group_pareto(keys, x, y)[n_rival:]


def cross_type_pruned(
    pre: PrefillSet,
    dec: DecodeSet,
    rivals: tuple[PrefillSet, DecodeSet],
    prices: tuple[float, float],
) -> tuple[PrefillSet, DecodeSet]:
    """The roles of a pair of two GPU types less the workers the other type beats.

    A prefill worker of the pair's prefill type is dropped when a prefill worker of the decode
    type with the same dtypes and size serves at least its capacity per price-weighted GPU
    (``prices``: (prefill type, decode type) $/GPU-hour, or 1 each when GPUs are what counts) and
    runs one prompt alone no slower; a decode point likewise when a point of the prefill type at
    the same clients gives at least its tokens/s per price-weighted GPU and per user. Swapping the
    beaten worker for its rival makes the pair one GPU type, no dearer and no slower, with a KV
    link no slower (one type's scale-up domain or NIC against the slower NIC of two); so only
    the pairs that can beat every same-type plan are priced whole (exact up to whole worker
    counts)."""
    rp, rd = rivals
    p_price, d_price = prices
    dec = at_prefill_fraction(pre, dec)
    ok_p = pre.role.fits
    p_keys = np.concatenate([dtype_key(rp.pre), dtype_key(pre.pre)])
    p_cap = np.concatenate(
        [
            1.0 / (rp.role.work_s * rp.pre.gpus_per_worker * d_price),
            1.0 / (pre.role.work_s * pre.pre.gpus_per_worker * p_price),
        ]
    )
    p_alone = -np.concatenate([rp.role.alone_s, pre.role.alone_s])
    p_fit = np.concatenate([rp.role.fits, ok_p])
    p_cap = np.where(p_fit, p_cap, -np.inf)
    keep_p = np.flatnonzero(ok_p & ~_beaten(p_keys, p_cap, p_alone, rp.pre.size))
    d_keys = np.concatenate(
        [dtype_key(rd.dec) * 1000 + rd.clients, dtype_key(dec.dec) * 1000 + dec.clients]
    ).astype(np.int64)

    def per_gpu(s: DecodeSet, price: float) -> np.ndarray:
        running = np.maximum(np.minimum(s.clients, s.dec.max_num_seqs), 1.0)
        held = np.minimum(running, s.role.seq_capacity)
        return np.where(s.role.seq_capacity >= 1, held / s.role.step_s, -np.inf) / (
            s.dec.gpus_per_worker * price
        )

    d_tok = np.concatenate([per_gpu(rd, p_price), per_gpu(dec, d_price)])
    d_user = 1.0 / np.concatenate([rd.role.step_s, dec.role.step_s])
    keep_d = np.flatnonzero(~_beaten(d_keys, d_tok, d_user, rd.dec.size))
    pre_role = PrefillRole(pre.role.alone_s[keep_p], pre.role.work_s[keep_p], pre.role.fits[keep_p])
    return (
        PrefillSet(pre.gpu, pre.pre.take(keep_p), pre_role, pre.enumerated, pre.pruned),
        _take(dec, keep_d),
    )


def phase_sets(
    m: ModelSpec, gpu: GpuSpec, gi: int, space: SearchSpace, load: Load, decode_clients: np.ndarray
) -> PhaseSets | None:
    """Prefill workers and decode points at ``decode_clients``, both on ``gpu``."""
    pre = prefill_set(m, gpu, gi, space, load)
    return combine(pre, decode_set(m, gpu, gi, space, load, decode_clients) if pre else None)


def decode_levels(space: SearchSpace, load: Load) -> np.ndarray:
    """Clients per decode worker the no-load / fixed-concurrency search prices decode at."""
    if load.concurrency is None:
        return np.array(space.concurrency_per_worker)
    return np.unique(
        np.ceil(load.concurrency / count_ladder(min(space.max_gpus, load.concurrency)))
    )


def running(s: PhaseSets) -> np.ndarray:
    """Requests a decode point runs: clients, at most max_num_seqs and the KV capacity."""
    return np.maximum(
        np.minimum(np.minimum(s.dec_clients, s.dec.max_num_seqs), s.dec_role.seq_capacity), 1.0
    )


def size_key(w: Workers, any_size: bool) -> np.ndarray:
    """Pruning groups: dtype pair and GPUs per worker, or the dtype pair alone (``any_size``)."""
    return dtype_key(w) // 1000 * 1000 if any_size else dtype_key(w)


def prune_prefill(s: PhaseSets, any_size: bool = False, pp_free: bool = False) -> np.ndarray:
    """Prefill workers on the (capacity per GPU, fast alone) front per dtype pair and worker size
    (``any_size``: per dtype pair, over all sizes; ``pp_free``: of the workers without PP)."""
    gpw = s.pre.gpus_per_worker
    ok = np.flatnonzero(s.pre_role.fits & ((s.pre.pp == 1) | (not pp_free)))
    front = group_pareto(
        size_key(s.pre, any_size)[ok],
        1.0 / (s.pre_role.work_s[ok] * gpw[ok]),
        -s.pre_role.alone_s[ok],
    )
    return ok[front]


def prune_decode(
    s: PhaseSets,
    tpot_slo_ms: float,
    per_level: bool = False,
    any_size: bool = False,
    pp_free: bool = False,
) -> np.ndarray:
    """Decode points within the TPOT SLO on the (tok/s/GPU, tok/s/user) front per group
    (``pp_free``: of the workers without PP)."""
    step = s.dec_role.step_s
    free = (s.dec.pp == 1) | (not pp_free)
    ok = np.flatnonzero((step * 1e3 <= tpot_slo_ms) & (s.dec_role.seq_capacity >= 1) & free)
    keys = size_key(s.dec, any_size) + (s.dec_clients.astype(int) * 100_000 if per_level else 0)
    per_gpu = running(s) / step / s.dec.gpus_per_worker
    return ok[group_pareto(keys[ok], per_gpu[ok], 1.0 / step[ok])]


def pairs(
    s: PhaseSets,
    pi: np.ndarray,
    dy: tuple[np.ndarray, np.ndarray],
    xs: np.ndarray,
    max_gpus: int,
    osl: int,
) -> Units:
    """(prefill, decode, x, y) with equal dtypes, x in ``xs``, (decode, y) from ``dy`` and
    x·gp + y·gd <= max_gpus; above a budget of DENSE_COUNTS, x near the prefill need."""
    di, ys = dy
    pp, kk = (a.ravel() for a in np.meshgrid(pi, np.arange(di.size), indexing="ij"))
    dd, yy = di[kk], ys[kk]
    same = (s.pre.quant[pp] == s.dec.quant[dd]) & (s.pre.kv[pp] == s.dec.kv[dd])
    pp, dd, yy = pp[same], dd[same], yy[same]
    p, d, y = (np.repeat(a, xs.size) for a in (pp, dd, yy))
    x = np.tile(xs, pp.size)
    keep = x * s.pre.gpus_per_worker[p] + y * s.dec.gpus_per_worker[d] <= max_gpus
    if max_gpus > DENSE_COUNTS:
        keep &= near_prefill_need(s, p, d, x, y, osl)
    return Units(p[keep], d[keep], x[keep], y[keep])


def near_prefill_need(
    s: PhaseSets, p: np.ndarray, d: np.ndarray, x: np.ndarray, y: np.ndarray, osl: int
) -> np.ndarray:
    """x within a factor PREFILL_WINDOW of the prefill workers the decode pool's request rate keeps
    busy (y x running / (step x OSL) requests/s x prefill seconds per prompt), or within 1..4."""
    need = y * running(s)[d] / (s.dec_role.step_s[d] * osl) * s.pre_role.work_s[p]
    return (x <= 4) | ((x >= need / PREFILL_WINDOW) & (x <= need * PREFILL_WINDOW + 1))


def decode_counts(
    s: PhaseSets, di: np.ndarray, ys: np.ndarray, concurrency: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(decode point, decode workers y): every y of ``ys`` with no load; with N clients, the y of
    ``ys`` whose share ceil(N / y) is that point's clients per worker."""
    d, y = (a.ravel() for a in np.meshgrid(di, ys, indexing="ij"))
    if concurrency is not None:
        keep = s.dec_clients[d] == np.ceil(concurrency / y)
        d, y = d[keep], y[keep]
    return d, y


def lowest_terms(u: Units) -> Units:
    """With no load only the P:D ratio matters: k x prefill and k x decode workers with k x the
    clients give each worker the same load, so the same latencies and tokens/s per GPU and per
    user (a duplicate on the Pareto front and for every objective: per GPU, per token, or the
    fewest GPUs, which is k = 1). The KV-transfer link can only be faster for the smaller one
    (it stays in the scale-up domain longer). Keeps x:y in lowest terms."""
    keep = np.gcd(u.x, u.y) == 1
    return Units(u.p[keep], u.d[keep], u.x[keep], u.y[keep])


def unit_columns(s: PhaseSets, u: Units) -> dict[str, np.ndarray]:
    """CandidateArrays columns of disaggregated deployments ``u``."""
    return {
        **s.dec.take(u.d).columns(),
        **s.pre.take(u.p).columns("prefill_"),
        "mode": np.ones(u.p.size),
        "workers": u.y.astype(float),
        "prefill_workers": u.x.astype(float),
    }


def unit_block(
    m: ModelSpec, gpu: GpuSpec, s: PhaseSets, u: Units, load: Load, conc: np.ndarray, evaluated: int
) -> Block:
    """Predict deployments ``u`` (closed loop of ``conc`` clients each, NaN = open loop) as one
    block."""
    cols = unit_columns(s, u) | {"concurrency": conc}
    res = evaluate_roles(m, gpu, s.prefill_gpu, load, s.dec.mem_frac[u.d], cols)
    return Block(
        "disagg",
        gpu,
        res,
        conc,
        conc / u.y,
        np.ones(u.p.size, dtype=int),
        units=u,
        prefill=s.pre,
        decode=s.dec,
        evaluated=evaluated,
        memory_pruned=s.pruned,
        prefill_gpu=s.prefill_gpu,
    )


def disagg_block(
    m: ModelSpec,
    gpu: GpuSpec,
    gi: int,
    space: SearchSpace,
    load: Load,
    tpot_slo_ms: float,
    sets: PhaseSets | None = None,
) -> Block | None:
    """Disaggregated xPyD candidates of one GPU type (no load, or a fixed concurrency).

    Worker counts never span the budget: with no load the deployment is a closed loop of y x
    clients, so only the P:D ratio matters: x, y run over 1..DENSE_COUNTS in lowest terms (and
    from ``FREE_SIZE_BUDGET`` GPUs each role keeps its front over all worker sizes); with N
    clients, y and
    x run over the count ladder (every count to DENSE_COUNTS, then steps of 25%). Above a budget of
    DENSE_COUNTS, x stays near what the decode pool's request rate keeps busy
    (:func:`near_prefill_need`). ``sets``: the roles' sets already priced (a pair of GPU types;
    default: both roles on ``gpu``, at ``decode_levels``).
    """
    if load.concurrency is None:
        xs = ys = np.arange(1, min(space.max_gpus, DENSE_COUNTS) + 1)
    else:
        xs = ys = count_ladder(min(space.max_gpus, load.concurrency))
    s = sets or phase_sets(m, gpu, gi, space, load, decode_levels(space, load))
    if s is None:
        return None
    # no load on a large budget: worker counts scale freely (only the P:D ratio matters), so a
    # worker size is no reason to keep a worker another size beats on both axes of its front
    free = load.concurrency is None and space.max_gpus >= FREE_SIZE_BUDGET
    di = prune_decode(s, tpot_slo_ms, not free, any_size=free)
    u = pairs(
        s,
        prune_prefill(s, any_size=free),
        decode_counts(s, di, ys, load.concurrency),
        xs,
        space.max_gpus,
        load.osl,
    )
    if load.concurrency is not None:
        conc = np.full(u.p.size, float(load.concurrency))
    else:
        u = lowest_terms(u)
        conc = u.y * s.dec_clients[u.d]
    if u.p.size == 0:
        return None  # no decode point meets the TPOT SLO on this GPU type
    return unit_block(m, gpu, s, u, load, conc, int(u.p.size + s.pre.size + s.dec.size))
