"""Pareto front of throughput per GPU vs throughput per user (both to maximize)."""

from __future__ import annotations

import numpy as np


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True for points no other point beats in both x and y (ties kept once), O(K log K).

    Sort by x descending (y descending to break ties); a point is on the front when its y exceeds
    the best y of every point with a larger or equal x seen before it.
    """
    if x.size == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-y, -x))
    ys = y[order]
    best_before = np.maximum.accumulate(np.concatenate(([-np.inf], ys[:-1])))
    mask = np.zeros(x.size, dtype=bool)
    mask[order] = ys > best_before
    return mask


def pareto_indices(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the front, ordered by x descending (most throughput per GPU first)."""
    idx = np.flatnonzero(pareto_mask(x, y))
    return idx[np.argsort(-x[idx], kind="stable")]


def group_pareto(keys: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask of each group's own front (``keys``: one integer label per point)."""
    mask = np.zeros(x.size, dtype=bool)
    for k in np.unique(keys):
        sel = np.flatnonzero(keys == k)
        mask[sel[pareto_mask(x[sel], y[sel])]] = True
    return mask
