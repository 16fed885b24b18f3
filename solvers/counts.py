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
    best = np.full(n_max.size, big)
    first = np.arange(1, dense + 1)
    i, n = np.repeat(np.arange(n_max.size), first.size), np.tile(first, n_max.size)
    keep = n <= n_max[i]
    if keep.any():
        ok = check(i[keep], n[keep])
        np.minimum.at(best, i[keep][ok], n[keep][ok])
    todo = np.flatnonzero((best == big) & (n_max > dense))
    if todo.size:
        todo = todo[check(todo, n_max[todo])]  # the lightest load the budget allows
        best[todo] = _gallop(
            todo, np.full(todo.size, dense), n_max[todo].copy(), check, best, weight
        )
    return np.where(best == big, 0, best)


def _gallop(
    todo: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    check: Check,
    best: np.ndarray,
    weight: np.ndarray | None,
) -> np.ndarray:
    """hi after narrowing (lo infeasible, hi feasible) to adjacent counts or giving up (weight)."""
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
        mid = np.where(2 * lo[act] < hi[act], 2 * lo[act], (lo[act] + hi[act]) // 2)
        ok = check(todo[act], mid)
        hi[act] = np.where(ok, mid, hi[act])
        lo[act] = np.where(ok, lo[act], mid)
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
