"""Size a disaggregated deployment for an open-loop request rate with the P/D MILP.

Every number comes from :func:`planner.perf.batch.evaluate_batch` at the requested rate R:

* decode option d: the fewest workers y_d that keep TPOT within the SLO (and the queue stable) when
  paired with an ample prefill pool (the highest-capacity prefill worker of its dtypes, as many as
  fit);
* prefill option p: the fewest workers x_p that keep TTFT within the SLO when paired with the best
  decode option of its dtypes at its y_d.

The fewest counts are found for all options at once by :func:`solvers.counts.fewest_counts` (every
count up to ``DISAGG_DENSE_COUNTS``, then galloping search), so the work grows with log2 of the
answer, not with the GPU budget.

Option capacities R / x_p and R / y_d make the MILP of :mod:`solvers.pd_milp` choose exactly those
counts (ceil(R / (R / n)) = n) while it picks the options and the dtype group at minimum GPUs or
cost. The chosen deployment is then predicted whole; if pairing the two choices misses the SLO, one
or two more workers of either role are tried (fewest GPUs first).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hardware.spec import GpuSpec
from planner.model.spec import ModelSpec
from solvers.candidates import Block, Load, Units, percentile_ms
from solvers.counts import fewest_counts
from solvers.disagg import (
    PhaseSets,
    dtype_key,
    phase_sets,
    prune_decode,
    prune_prefill,
    running,
    unit_block,
)
from solvers.pd_milp import PdSolution, PhaseOptions, solve_pd
from solvers.space import SearchSpace

DISAGG_DENSE_COUNTS = 8
"""Worker counts all checked before bisection: a pair within one scale-up domain moves its KV cache
over the faster link, so feasibility can drop as a small deployment outgrows the domain."""
REPAIR_WORKERS = 2
"""Extra workers per role tried when the MILP's pair misses the SLO as a whole."""
Factors = Callable[[Block], tuple[np.ndarray, np.ndarray]]
"""Per candidate of a block, what its TTFT and TPOT predictions are multiplied by before the SLO
check (the confidence the SLO must hold with; ``solvers.plan_core.band_factor``)."""
Slo = tuple[float, float, str, Factors | None]
"""TTFT and TPOT SLOs (ms), their percentile, and the factors they are checked with (None: the
point prediction)."""


def _ok(
    b: Block,
    ttft_ms: float,
    tpot_ms: float,
    percentile: str,
    factors: Factors | None,
    roles: str = "both",
) -> np.ndarray:
    """Deployments meeting the SLO at ``factors`` x the prediction (``roles="decode"``: TPOT and a
    stable queue only)."""
    f_ttft, f_tpot = factors(b) if factors is not None else (1.0, 1.0)
    ok = b.res.feasible & (percentile_ms(b.res, "tpot", percentile) * f_tpot <= tpot_ms)
    if roles == "decode":
        return ok
    return ok & (percentile_ms(b.res, "ttft", percentile) * f_ttft <= ttft_ms)


def _fewest(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: Slo,
    opts: np.ndarray,
    partner: np.ndarray,
    partner_n: np.ndarray,
    by_p: bool,
    max_gpus: int,
) -> np.ndarray:
    """Smallest worker count per option meeting the SLO next to ``partner_n`` workers of ``partner``
    (one each per option; 0 when none within the budget); by bisection over all options at once,
    never a grid of counts (:mod:`solvers.counts`)."""
    gpw = (s.pre if by_p else s.dec).gpus_per_worker[opts]

    def check(i: np.ndarray, n: np.ndarray) -> np.ndarray:
        u = (
            Units(opts[i], partner[i], n, partner_n[i])
            if by_p
            else Units(partner[i], opts[i], partner_n[i], n)
        )
        b = unit_block(m, gpu, s, u, load, np.full(u.p.size, np.nan), 0)
        return _ok(b, *slo, roles="both" if by_p else "decode")

    return fewest_counts(max_gpus // gpw, check, dense=DISAGG_DENSE_COUNTS)


def _options(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: Slo,
    max_gpus: int,
    pp_free: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(prefill options, their x, decode options, their y) for one GPU type (``pp_free``: of the
    workers without PP).

    Decode options are sized next to an ample pool of the highest-capacity prefill worker of their
    dtypes, prefill options next to the best decode option of theirs at its size.
    """
    pi = prune_prefill(s, pp_free=pp_free)
    di = prune_decode(s, slo[1], pp_free=pp_free)
    gp, gd = s.pre.gpus_per_worker, s.dec.gpus_per_worker
    pkey, dkey = dtype_key(s.pre) // 1000, dtype_key(s.dec) // 1000
    cap_p = 1.0 / (s.pre_role.work_s * gp)
    p_ref, x_ref = np.full(di.size, -1), np.zeros(di.size, dtype=int)
    for key in np.unique(dkey[di]):
        cand = pi[pkey[pi] == key]
        if cand.size:
            best = int(cand[np.argmax(cap_p[cand])])
            p_ref[dkey[di] == key], x_ref[dkey[di] == key] = best, max(1, max_gpus // int(gp[best]))
    y = np.zeros(di.size, dtype=int)
    has = p_ref >= 0
    y[has] = _fewest(m, gpu, s, load, slo, di[has], p_ref[has], x_ref[has], False, max_gpus)
    d_ref, y_ref = np.full(pi.size, -1), np.zeros(pi.size, dtype=int)
    per_gpu = running(s) / s.dec_role.step_s / gd
    for key in np.unique(pkey[pi]):
        dsel = (dkey[di] == key) & (y > 0)
        if dsel.any():
            k = int(np.argmax(np.where(dsel, per_gpu[di] / np.maximum(y, 1), -np.inf)))
            d_ref[pkey[pi] == key], y_ref[pkey[pi] == key] = int(di[k]), int(y[k])
    x = np.zeros(pi.size, dtype=int)
    has = d_ref >= 0
    x[has] = _fewest(m, gpu, s, load, slo, pi[has], d_ref[has], y_ref[has], True, max_gpus)
    return pi[x > 0], x[x > 0], di[y > 0], y[y > 0]


def _repair(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: Slo,
    p: int,
    d: int,
    x: int,
    y: int,
    max_gpus: int,
) -> Block | None:
    """The MILP's pair, or the cheapest of up to REPAIR_WORKERS extra workers per role that meets
    the SLO."""
    extra = np.arange(REPAIR_WORKERS + 1)
    xs, ys = (
        a.ravel() + n for a, n in zip(np.meshgrid(extra, extra, indexing="ij"), (x, y), strict=True)
    )
    u = Units(np.full(xs.size, p), np.full(xs.size, d), xs, ys)
    b = unit_block(m, gpu, s, u, load, np.full(xs.size, np.nan), 0)
    ok = _ok(b, *slo) & (b.res.gpus <= max_gpus)
    if not ok.any():
        return None
    i = int(np.argmin(np.where(ok, b.res.gpus, np.inf)))
    one = Units(u.p[[i]], u.d[[i]], u.x[[i]], u.y[[i]])
    return unit_block(m, gpu, s, one, load, np.full(1, np.nan), 0)


def _solve(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    space: SearchSpace,
    load: Load,
    slo: Slo,
    prices: tuple[float, float],
    pp_free: bool,
) -> tuple[Block | None, PdSolution | None]:
    """The MILP's deployment for one SLO check, verified whole (None when none meets it);
    ``prices``: $/GPU-hour of the (prefill, decode) GPU types."""
    assert load.rate_per_s is not None
    pi, x, di, y = _options(m, gpu, s, load, slo, space.max_gpus, pp_free)
    if pi.size == 0 or di.size == 0:
        return None, None
    rate = load.rate_per_s
    popt = PhaseOptions(
        dtype_key(s.pre)[pi] // 1000,
        s.pre.gpus_per_worker[pi],
        rate / x,
        np.full(pi.size, prices[0]),
    )
    dopt = PhaseOptions(
        dtype_key(s.dec)[di] // 1000,
        s.dec.gpus_per_worker[di],
        rate / y,
        np.full(di.size, prices[1]),
    )
    # each role is bought in whole purchase units of its own GPU type
    unit_p, unit_d = (space.node_gpus or g.purchase_unit_gpus for g in (s.prefill_gpu, gpu))
    units = (unit_p if unit_p > 1 else None, unit_d if unit_d > 1 else None)
    sol = solve_pd(popt, dopt, rate, space.max_gpus, node_gpus=units)
    if sol is None:
        return None, None
    p, d = int(pi[sol.prefill]), int(di[sol.decode])
    return _repair(m, gpu, s, load, slo, p, d, sol.x, sol.y, space.max_gpus), sol


def rate_disagg_block(
    m: ModelSpec,
    gpu: GpuSpec,
    gi: int,
    space: SearchSpace,
    load: Load,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    percentile: str,
    price: float,
    factors: Factors | None = None,
    sets: PhaseSets | None = None,
    prefill_price: float | None = None,
) -> tuple[Block | None, PdSolution | None]:
    """Solve the P/D MILP for one GPU type (or, with ``sets`` priced on two types, one prefill /
    decode pair: ``price`` of the decode type, ``prefill_price`` of the prefill type) and wrap the
    verified deployment as a block.

    Workers without pipeline parallelism are tried first; PP only when no PP-free pair meets the
    SLO. With ``factors`` (the SLO must hold at a confidence above the point prediction) the worker
    counts are sized with the SLO checked at factors x the prediction (the band grows or shrinks
    with the prefill load, so more or wider prefill workers can be what meets it), and the
    deployment sized at the point prediction joins it as a second candidate: the plan states
    both when they differ. The MILP details returned are those of the first sizing that found one.
    """
    assert load.rate_per_s is not None
    s = sets or phase_sets(m, gpu, gi, space, load, rate_levels(space))
    if s is None:
        return None, None
    checks: list[Factors | None] = [factors, None] if factors is not None else [None]
    found, sols = [], []
    for f in checks:
        slo = (slo_ttft_ms, slo_tpot_ms, percentile, f)
        for pp_free in (True, False):  # PP only when no PP-free pair meets the SLO
            prices = (price if prefill_price is None else prefill_price, price)
            b, sol = _solve(m, gpu, s, space, load, slo, prices, pp_free)
            sols.append(sol)
            if b is not None and b.units is not None:
                found.append(b.units)
                break
    sol = next((x for x in sols if x is not None), None)
    if not found:
        return None, sol
    cols = np.stack([np.concatenate([getattr(f, k) for f in found]) for k in "pdxy"])
    u = Units(*np.unique(cols, axis=1))  # one candidate when both sizings agree
    blk = unit_block(m, gpu, s, u, load, np.full(u.p.size, np.nan), 0)
    n = int(s.pre.size + s.dec.size)
    return Block(
        "disagg",
        gpu,
        blk.res,
        blk.concurrency,
        blk.clients,
        blk.replicas,
        units=blk.units,
        prefill=s.pre,
        decode=s.dec,
        evaluated=n,
        memory_pruned=s.pruned,
        prefill_gpu=s.prefill_gpu,
    ), sol


def rate_levels(space: SearchSpace) -> np.ndarray:
    """Clients per decode worker the rate search prices decode at: its largest max_num_seqs."""
    return np.array([max(space.max_num_seqs)])
