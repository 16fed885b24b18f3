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

import numpy as np

from hardware.spec import GpuSpec
from planner.model.spec import ModelSpec
from solvers.candidates import Block, Edge, Load, Units, block_meets
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


def _ok(
    b: Block, slo: tuple[float, float, str], edge: Edge | None, roles: str = "both"
) -> np.ndarray:
    """Deployments meeting the SLO at ``edge`` (the plan's own test; ``roles="decode"``: TPOT and a
    stable queue only)."""
    return block_meets(b, slo, edge, tpot_only=roles == "decode")


def _fewest(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: tuple[float, float, str],
    opts: np.ndarray,
    partner: np.ndarray,
    partner_n: np.ndarray,
    by_p: bool,
    max_gpus: int,
    edge: Edge | None,
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
        return _ok(b, slo, edge, roles="both" if by_p else "decode")

    return fewest_counts(max_gpus // gpw, check, dense=DISAGG_DENSE_COUNTS)


def _options(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: tuple[float, float, str],
    max_gpus: int,
    edge: Edge | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(prefill options, their x, decode options, their y) for one GPU type.

    Decode options are sized next to an ample pool of the highest-capacity prefill worker of their
    dtypes, prefill options next to the best decode option of theirs at its size.
    """
    pi, di = prune_prefill(s), prune_decode(s, slo[1])
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
    y[has] = _fewest(m, gpu, s, load, slo, di[has], p_ref[has], x_ref[has], False, max_gpus, edge)
    d_ref, y_ref = np.full(pi.size, -1), np.zeros(pi.size, dtype=int)
    per_gpu = running(s) / s.dec_role.step_s / gd
    for key in np.unique(pkey[pi]):
        dsel = (dkey[di] == key) & (y > 0)
        if dsel.any():
            k = int(np.argmax(np.where(dsel, per_gpu[di] / np.maximum(y, 1), -np.inf)))
            d_ref[pkey[pi] == key], y_ref[pkey[pi] == key] = int(di[k]), int(y[k])
    x = np.zeros(pi.size, dtype=int)
    has = d_ref >= 0
    x[has] = _fewest(m, gpu, s, load, slo, pi[has], d_ref[has], y_ref[has], True, max_gpus, edge)
    return pi[x > 0], x[x > 0], di[y > 0], y[y > 0]


def _repair(
    m: ModelSpec,
    gpu: GpuSpec,
    s: PhaseSets,
    load: Load,
    slo: tuple[float, float, str],
    p: int,
    d: int,
    x: int,
    y: int,
    max_gpus: int,
    edge: Edge | None,
) -> Block | None:
    """The MILP's pair, or the cheapest of up to REPAIR_WORKERS extra workers per role that meets
    the SLO."""
    extra = np.arange(REPAIR_WORKERS + 1)
    xs, ys = (
        a.ravel() + n for a, n in zip(np.meshgrid(extra, extra, indexing="ij"), (x, y), strict=True)
    )
    u = Units(np.full(xs.size, p), np.full(xs.size, d), xs, ys)
    b = unit_block(m, gpu, s, u, load, np.full(xs.size, np.nan), 0)
    ok = _ok(b, slo, edge) & (b.res.gpus <= max_gpus)
    if not ok.any():
        return None
    i = int(np.argmin(np.where(ok, b.res.gpus, np.inf)))
    one = Units(u.p[[i]], u.d[[i]], u.x[[i]], u.y[[i]])
    return unit_block(m, gpu, s, one, load, np.full(1, np.nan), 0)


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
    edge: Edge | None = None,
) -> tuple[Block | None, PdSolution | None]:
    """Solve the P/D MILP for one GPU type and wrap the verified deployment as a one-candidate
    block; every count is checked at ``edge`` (the plan's own test)."""
    assert load.rate_per_s is not None
    s = phase_sets(m, gpu, gi, space, load, np.array([max(space.max_num_seqs)]))
    if s is None:
        return None, None
    slo = (slo_ttft_ms, slo_tpot_ms, percentile)
    pi, x, di, y = _options(m, gpu, s, load, slo, space.max_gpus, edge)
    if pi.size == 0 or di.size == 0:
        return None, None
    rate = load.rate_per_s
    popt = PhaseOptions(
        dtype_key(s.pre)[pi] // 1000, s.pre.gpus_per_worker[pi], rate / x, np.full(pi.size, price)
    )
    dopt = PhaseOptions(
        dtype_key(s.dec)[di] // 1000, s.dec.gpus_per_worker[di], rate / y, np.full(di.size, price)
    )
    sol = solve_pd(popt, dopt, rate, space.max_gpus, node_gpus=space.node_gpus)
    if sol is None:
        return None, None
    b = _repair(
        m,
        gpu,
        s,
        load,
        slo,
        int(pi[sol.prefill]),
        int(di[sol.decode]),
        sol.x,
        sol.y,
        space.max_gpus,
        edge,
    )
    if b is None:
        return None, sol
    n = int(s.pre.size + s.dec.size)
    return Block(
        "disagg",
        gpu,
        b.res,
        b.concurrency,
        b.clients,
        b.replicas,
        units=b.units,
        prefill=s.pre,
        decode=s.dec,
        evaluated=n,
        memory_pruned=s.pruned,
    ), sol
