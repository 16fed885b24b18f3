"""Worker counts without enumerating the budget: the fewest that meet the SLO, and a short ladder.

The search prices each worker shape once per count it tries, so the counts tried must not grow with
the GPU budget. :func:`fewest_counts` finds, for many options at once, the smallest count n in
[1, n_max] for which a vectorised check passes: every n <= ``dense`` is checked (small
deployments, where the KV-transfer path and integer rounding make feasibility jumpy, are exact),
then a galloping search (2x per check, then bisection) that assumes feasibility stays once
reached (more replicas or workers share the same load; ``tests/solvers/test_counts.py`` checks
the answer against checking every count). :func:`count_ladder` is the geometric set of counts
the closed-loop searches try (every count up to ``DENSE_COUNTS``, then steps of
``LADDER_RATIO``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DENSE_COUNTS = 16
"""Counts up to this are all checked; above it a bisection (log2(n_max) checks) takes over."""
LADDER_RATIO = 1.25
"""Ratio between successive counts of :func:`count_ladder` above ``DENSE_COUNTS``."""
MAX_BUDGET_GPUS = 100_000
"""Largest GPU budget a plan accepts (the count arrays the search builds stay O(log budget))."""

Check = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""check(option indices, counts) -> bool array: does that option meet the SLO with that count."""


def count_ladder(n_max: int) -> np.ndarray:
    """1..DENSE_COUNTS, then counts growing by LADDER_RATIO, up to and including ``n_max``."""
    if n_max <= DENSE_COUNTS:
        return np.arange(1, max(n_max, 0) + 1)
    steps = int(np.ceil(np.log(n_max / DENSE_COUNTS) / np.log(LADDER_RATIO)))
    upper = np.ceil(DENSE_COUNTS * LADDER_RATIO ** np.arange(1, steps + 1)).astype(int)
    return np.unique(
        np.concatenate([np.arange(1, DENSE_COUNTS + 1), np.minimum(upper, n_max), [n_max]])
    )


def fewest_counts(
    n_max: np.ndarray, check: Check, dense: int = DENSE_COUNTS, weight: np.ndarray | None = None
) -> np.ndarray:
    """Smallest n in [1, n_max[i]] with ``check`` true, per option i (0 where none passes).

    Every n <= ``dense`` is checked; above it, options feasible at n_max gallop up from ``dense``
    (2x per check) and bisect once bracketed, so the checks grow with log2 of the answer, not of
    the budget. With ``weight`` (GPUs per worker), an option is given up once (lo + 1) x weight
    exceeds the fewest GPUs found so far (it keeps its known feasible count, not the fewest).
    """
    n_max = np.asarray(n_max, dtype=np.int64)
    big = np.iinfo(np.int64).max
    # one first call: every count to ``dense``, the lightest load the budget allows (n_max) and
    # the first gallop probes above ``dense`` (the check's cost is mostly per call)
    i, n = _first_round(n_max, dense)
    ok = check(i, n) if i.size else np.zeros(0, dtype=bool)
    best = np.full(n_max.size, big)
    np.minimum.at(best, i[ok & (n <= dense)], n[ok & (n <= dense)])
    hi = np.full(n_max.size, big)
    np.minimum.at(hi, i[ok], n[ok])
    lo = np.full(n_max.size, dense, dtype=np.int64)
    np.maximum.at(lo, i[~ok & (n < hi[i])], n[~ok & (n < hi[i])])
    todo = np.flatnonzero((best == big) & (hi < big))
    if todo.size:
        best[todo] = _gallop(todo, lo[todo], hi[todo], check, best, weight)
    return np.where(best == big, 0, best)


def _first_round(n_max: np.ndarray, dense: int) -> tuple[np.ndarray, np.ndarray]:
    """(option, count) pairs of the first check: 1..dense, n_max, and dense x 2, x 4, x 8."""
    above = dense * 2 ** np.arange(1, PROBES + 1)
    counts = np.concatenate([np.arange(1, dense + 1), above])
    i = np.repeat(np.arange(n_max.size), counts.size + 1)
    n = np.column_stack([np.tile(counts, (n_max.size, 1)), n_max]).ravel()
    keep = (n >= 1) & (n <= n_max[i])
    pairs = np.unique(np.stack([i[keep], n[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


PROBES = 3
"""Counts one gallop round checks per option: the check's cost is mostly per call (the op graph is
priced once per call), so 3 probes per call cut the rounds about in half (4x narrowing a round)."""


def _probes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(options, PROBES) counts strictly between lo and hi: lo x 2, x 4, x 8 while galloping (2 x lo
    < hi), else evenly spaced; repeats where the gap is small."""
    k = np.arange(1, PROBES + 1)
    gallop = lo[:, None] * 2**k
    even = lo[:, None] + (hi - lo)[:, None] * k // (PROBES + 1)
    pts = np.where((2 * lo < hi)[:, None], gallop, even)
    return np.clip(pts, lo[:, None] + 1, hi[:, None] - 1)


def _gallop(
    todo: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    check: Check,
    best: np.ndarray,
    weight: np.ndarray | None,
) -> np.ndarray:
    """hi after narrowing (lo infeasible, hi feasible) to adjacent counts or giving up (weight);
    each round checks ``PROBES`` counts per live option in one call."""
    known = best < np.iinfo(np.int64).max
    dense_gpus = np.inf
    if weight is not None and known.any():
        dense_gpus = float(np.min(best[known] * weight[known]))
    while todo.size:
        live = hi - lo > 1
        if weight is not None:
            w = weight[todo]
            live &= (lo + 1) * w <= min(dense_gpus, float(np.min(hi * w)))
        act = np.flatnonzero(live)
        if act.size == 0:
            break
        pts = _probes(lo[act], hi[act])
        rows = np.repeat(np.arange(act.size), PROBES)
        flat = pts.ravel()
        uniq = np.unique(np.stack([rows, flat], axis=1), axis=0)
        ok = check(todo[act[uniq[:, 0]]], uniq[:, 1])
        big = np.iinfo(np.int64).max
        first_ok = np.full(act.size, big)
        np.minimum.at(first_ok, uniq[ok, 0], uniq[ok, 1])
        new_hi = np.minimum(hi[act], first_ok)
        below = ~ok & (uniq[:, 1] < new_hi[uniq[:, 0]])
        last_bad = lo[act].copy()
        np.maximum.at(last_bad, uniq[below, 0], uniq[below, 1])
        hi[act], lo[act] = new_hi, last_bad
    return hi


def around(n: np.ndarray, n_max: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(option index, count) of each option's count n and a few above it (n+1, x1.25, x1.5, x2)
    within n_max: the deployments a rate plan keeps for its Pareto front (n = 0: skipped)."""
    n, n_max = np.asarray(n, dtype=np.int64), np.asarray(n_max, dtype=np.int64)
    ladder = np.stack([n, n + 1, np.ceil(n * 1.25), np.ceil(n * 1.5), 2 * n], axis=1).astype(
        np.int64
    )
    ladder = np.minimum(ladder, n_max[:, None])
    i = np.repeat(np.arange(n.size), ladder.shape[1])
    c = ladder.ravel()
    keep = n[i] > 0
    pairs = np.unique(np.stack([i[keep], c[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]
