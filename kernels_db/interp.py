"""Interpolation inside a table's measured grid (log space over sizes).

What is interpolated is the log-ratio of measured latency to the model (fitted or default roofline)
at each measured point, so between points the model's shape carries the answer and at a measured
point the answer is the measurement. Sizes are mapped with log(1 + x). Category keys (dtypes, head
counts, collective, GPU count...) must match a measured row exactly. Outside the convex hull of the
measured sizes the caller falls back to the model (``inside`` is False there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.interpolate import LinearNDInterpolator
from scipy.spatial import QhullError, cKDTree

from kernels_db.schema import SIZE_KEYS, category_keys
from kernels_db.tables import KernelTable

EXACT_TOL = 1e-9


@dataclass(frozen=True)
class Hit:
    """Per query row: log-ratio to apply, whether inside the grid, whether on a measured point."""

    log_ratio: np.ndarray
    inside: np.ndarray
    exact: np.ndarray


class Partition:
    """Rows of one category tuple: sizes that vary are interpolated, the others must match."""

    def __init__(self, coords: np.ndarray, values: np.ndarray) -> None:
        self.vary = np.array([np.unique(coords[:, j]).size > 1 for j in range(coords.shape[1])], dtype=bool)
        self.fixed = coords[0, ~self.vary]
        pts = coords[:, self.vary]
        self.tree = cKDTree(coords)
        self.values = values
        self.interp: LinearNDInterpolator | None = None
        self.line: tuple[np.ndarray, np.ndarray] | None = None
        if pts.shape[1] == 1:
            order = np.argsort(pts[:, 0])
            self.line = (pts[order, 0], values[order])
        elif pts.shape[1] >= 2:
            try:
                self.interp = LinearNDInterpolator(pts, values)
            except QhullError:  # degenerate (all points on a plane): only exact hits count
                self.interp = None

    def query(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log_ratio, inside, exact) for query coordinates ``q`` (rows x dims)."""
        match = np.all(np.abs(q[:, ~self.vary] - self.fixed) < EXACT_TOL, axis=1)
        dist, idx = self.tree.query(q)
        exact = dist < EXACT_TOL
        vals = np.where(exact, self.values[idx], np.nan)
        pts = q[:, self.vary]
        if self.line is not None:
            xs, ys = self.line
            x = pts[:, 0]
            inner = (x >= xs[0]) & (x <= xs[-1])
            vals = np.where(inner & ~exact, np.interp(x, xs, ys), vals)
        elif self.interp is not None:
            todo = match & ~exact
            if todo.any():
                vals[todo] = self.interp(pts[todo])
        inside = match & np.isfinite(vals)
        return np.where(inside, vals, 0.0), inside, exact & match


def size_coords(op: str, cols: Mapping[str, Any], n: int) -> np.ndarray:
    """(n, d) log(1 + size) coordinates of the size keys of ``op``."""
    return np.stack([np.log1p(np.broadcast_to(np.asarray(cols[k], dtype=float), (n,))) for k in SIZE_KEYS[op]],
                    axis=1)


def category_labels(op: str, cols: Mapping[str, Any], n: int) -> np.ndarray:
    keys = category_keys(op)
    if not keys:
        return np.zeros(n, dtype=np.int64)
    parts = [np.broadcast_to(np.asarray(cols[k]).astype(str), (n,)) for k in keys]
    if all(np.ndim(cols[k]) == 0 for k in keys):
        return np.full(n, "|".join(str(cols[k]) for k in keys), dtype=object)
    out = parts[0].astype(object)
    for p in parts[1:]:
        out = out + "|" + p.astype(object)
    return out


class TableInterpolator:
    """Interpolates log(measured / model) of one table; built once per table and model."""

    def __init__(self, table: KernelTable, model_seconds: Callable[[Mapping[str, Any], int], np.ndarray]) -> None:
        n = len(table)
        self.op = table.op
        base = model_seconds(table.keys, n)
        ratio = np.log(table.latency_s) - np.log(base)
        labels = category_labels(table.op, table.keys, n)
        coords = size_coords(table.op, table.keys, n)
        self.parts: dict[Any, Partition] = {}
        for lab in dict.fromkeys(labels.tolist()):
            mask = labels == lab
            self.parts[lab] = Partition(coords[mask], ratio[mask])

    def query(self, cols: Mapping[str, Any], n: int) -> Hit:
        """Look up ``n`` query rows (``cols`` broadcastable to ``n``)."""
        labels = category_labels(self.op, cols, n)
        coords = size_coords(self.op, cols, n)
        ratio, inside, exact = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for lab in set(labels.tolist()):
            part = self.parts.get(lab)
            if part is None:
                continue
            mask = labels == lab
            r, i, e = part.query(coords[mask])
            ratio[mask], inside[mask], exact[mask] = r, i, e
        return Hit(ratio, inside, exact)
