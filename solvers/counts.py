"""Worker counts without enumerating the budget: the fewest that meet the SLO, and a short ladder.

The search prices each worker shape once per count it tries, so the counts tried must not grow with
the GPU budget. :func:`fewest_counts` finds, for many options at once, the smallest count n in
[1, n_max] for which a vectorised check passes: every n <= ``DENSE_COUNTS`` is checked (small
deployments, where the KV-transfer path and integer rounding make feasibility jumpy, are exact),
then a bisection over (DENSE_COUNTS, n_max] that assumes feasibility stays once reached (more
replicas or workers share the same load; ``tests/solvers/test_counts.py`` checks the answer against
checking every count). :func:`count_ladder` is the geometric set of counts the closed-loop searches
try (every count up to ``DENSE_COUNTS``, then steps of ``LADDER_RATIO``).
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


def fewest_counts(n_max: np.ndarray, check: Check, dense: int = DENSE_COUNTS) -> np.ndarray:
    """Smallest n in [1, n_max[i]] with ``check`` true, per option i (0 where none passes); every
    n <= ``dense`` is checked, bisection above."""
    n_max = np.asarray(n_max, dtype=np.int64)
    big = np.iinfo(np.int64).max
    best = np.full(n_max.size, big)
    first = np.arange(1, dense + 1)
    i, n = np.repeat(np.arange(n_max.size), first.size), np.tile(first, n_max.size)
    keep = n <= n_max[i]
    i, n = i[keep], n[keep]
    if i.size:
        ok = check(i, n)
        np.minimum.at(best, i[ok], n[ok])
    todo = np.flatnonzero((best == big) & (n_max > dense))
    if todo.size:
        ok = check(todo, n_max[todo])  # the lightest load the budget allows
        todo = todo[ok]
        lo, hi = np.full(todo.size, dense), n_max[todo].copy()
        while todo.size and np.any(hi - lo > 1):
            act = np.flatnonzero(hi - lo > 1)
            mid = (lo[act] + hi[act]) // 2
            ok = check(todo[act], mid)
            hi[act] = np.where(ok, mid, hi[act])
            lo[act] = np.where(ok, lo[act], mid)
        best[todo] = hi
    return np.where(best == big, 0, best)


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
