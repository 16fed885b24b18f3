"""Interpolation inside a table's measured grid (log space over sizes).

What is interpolated is the log-ratio of measured latency to the model (fitted or default roofline)
at each measured point, so between points the model's shape carries the answer and at a measured
point the answer is the measurement. Sizes are mapped with log(1 + x). Category keys (dtypes, head
counts, collective, GPU count...) must match a measured row exactly.

The rows of one category tuple lie on the product grid of their distinct size values, with holes
(a sweep rarely measures every combination: decode tables stop where batch x kv_len gets large).
A query is priced, in order:

1. on a measured node: that node;
2. multilinear interpolation on the grid cell around it, when every corner that carries weight was
   measured (``scipy.interpolate.RegularGridInterpolator``'s linear rule, written out so the holes
   can be seen);
3. on a grid line (its coordinates are grid values on every axis but one, or on all of them at a
   hole): 1-D interpolation along each such line between the nearest measured nodes, averaged with
   weights 1 / (log-distance between those nodes) so that close neighbours count most;
4. otherwise ``inside`` is False and the caller falls back to the model.

Leave-one-out (``loo_log_ratio``) is rule 3 at each measured node with that node removed: exactly
what a lookup in the table less that row returns, vectorized over all rows at once.

Coordinates are the op's size keys, except for attention (``interp_space``). GQA decode
kernels read each KV head's cache once for all query heads of its group, so latency follows the work
units batch x kv_heads and kv_len, not the head counts themselves. In AIConfigurator's H200 table
heads/kv_heads 8/1 at batch 8 and 32/8 at batch 1 (8 units each) agree within 1-7% at every kv_len
from 1k to 64k. Rows of every head configuration therefore share one grid in (units, kv_len);
multi-head attention (heads == kv_heads) runs another kernel and keeps its own grid. Prefill
attention pools the same way on batch x heads at a fixed group size (leave-one-out p90 on the L40S
table 16% -> 9%). Several rows on one node are averaged; leaving one out then leaves the others'
mean.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from kernels_db.schema import SIZE_KEYS, category_keys
from kernels_db.tables import KernelTable

Column: TypeAlias = np.ndarray | float | int | str
"""One key column of a table or query: an array of rows or one value broadcast to all."""

EXACT_TOL = 1e-9


@dataclass(frozen=True)
class Hit:
    """Per query row: log-ratio to apply, whether inside the grid, whether on a measured point."""

    log_ratio: np.ndarray
    inside: np.ndarray
    exact: np.ndarray


def _nearest_valid(valid: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest valid node strictly below / above each node along ``axis``
    (-1 if none)."""
    v = np.moveaxis(valid, axis, -1)
    n = v.shape[-1]
    idx = np.where(v, np.arange(n), -1)
    below = np.maximum.accumulate(idx, axis=-1)
    below = np.concatenate([np.full(v.shape[:-1] + (1,), -1), below[..., :-1]], axis=-1)
    ridx = np.where(v, np.arange(n), n)[..., ::-1]
    above = np.minimum.accumulate(ridx, axis=-1)[..., ::-1]
    above = np.concatenate([above[..., 1:], np.full(v.shape[:-1] + (1,), n)], axis=-1)
    above = np.where(above >= n, -1, above)
    return np.moveaxis(below, -1, axis), np.moveaxis(above, -1, axis)


class Partition:
    """Rows of one category tuple on the product grid of their size values (holes are NaN; several
    rows on one node are averaged)."""

    def __init__(self, coords: np.ndarray, values: np.ndarray) -> None:
        self.vary = np.array(
            [np.unique(coords[:, j]).size > 1 for j in range(coords.shape[1])], dtype=bool
        )
        self.fixed = coords[0, ~self.vary]
        pts = coords[:, self.vary]
        self.axes = [np.unique(pts[:, j]) for j in range(pts.shape[1])]
        self.node = tuple(np.searchsorted(ax, pts[:, j]) for j, ax in enumerate(self.axes))
        self.values = np.asarray(values, dtype=float)
        if not self.axes:  # every row on one node
            self.node = (np.zeros(self.values.size, dtype=np.intp),)
        shape = tuple(ax.size for ax in self.axes) or (1,)
        total, self.count = np.zeros(shape), np.zeros(shape)
        np.add.at(total, self.node, self.values)
        np.add.at(self.count, self.node, 1.0)
        self.grid = np.where(self.count > 0, total / np.maximum(self.count, 1.0), np.nan)
        self.lines = [_nearest_valid(np.isfinite(self.grid), a) for a in range(len(self.axes))]

    def _bracket(
        self, pts: np.ndarray
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
        """Per axis: lower index, upper index, weight of the upper;
        and rows inside the grid's box."""
        lo_i, hi_i, ts = [], [], []
        inside = np.ones(len(pts), dtype=bool)
        for j, ax in enumerate(self.axes):
            x = pts[:, j]
            inside &= (x >= ax[0] - EXACT_TOL) & (x <= ax[-1] + EXACT_TOL)
            hi = np.clip(np.searchsorted(ax, x - EXACT_TOL), 0, ax.size - 1)
            lo = np.where(np.abs(ax[hi] - x) < EXACT_TOL, hi, np.maximum(hi - 1, 0))
            t = np.where(hi > lo, (x - ax[lo]) / np.where(hi > lo, ax[hi] - ax[lo], 1.0), 0.0)
            lo_i.append(lo)
            hi_i.append(hi)
            ts.append(np.clip(t, 0.0, 1.0))
        return lo_i, hi_i, ts, inside

    def _multilinear(
        self, lo: list[np.ndarray], hi: list[np.ndarray], ts: list[np.ndarray]
    ) -> np.ndarray:
        """Multilinear value per row; NaN where a corner with weight > 0 was not measured."""
        out = np.zeros(lo[0].size)
        for corner in itertools.product((0, 1), repeat=len(lo)):
            w = np.ones(lo[0].size)
            idx = []
            for j, c in enumerate(corner):
                w = w * (ts[j] if c else 1.0 - ts[j])
                idx.append(hi[j] if c else lo[j])
            v = self.grid[tuple(idx)]
            out = out + np.where(w > 0, w * v, 0.0)
        return out

    def query(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log_ratio, inside, exact) for query coordinates ``q`` (rows x dims)."""
        match = np.all(np.abs(q[:, ~self.vary] - self.fixed) < EXACT_TOL, axis=1)
        pts = q[:, self.vary]
        if not self.axes:
            return np.where(match, self.grid.item() if self.grid.size else 0.0, 0.0), match, match
        lo, hi, ts, box = self._bracket(pts)
        on = [(hi[j] == lo[j]) for j in range(len(lo))]
        exact = match & box & np.all(on, axis=0) & np.isfinite(self.grid[tuple(lo)])
        vals = self._multilinear(lo, hi, ts)
        todo = match & box & ~np.isfinite(vals)
        if todo.any():
            vals[todo] = self._lines(pts[todo], [a[todo] for a in lo], [o[todo] for o in on])
        inside = match & box & np.isfinite(vals)
        return np.where(inside, vals, 0.0), inside, exact

    def _lines(self, pts: np.ndarray, lo: list[np.ndarray], on: list[np.ndarray]) -> np.ndarray:
        """Rule 3: weighted mean of 1-D estimates along every axis the query's other coordinates sit
        on."""
        num, den = np.zeros(len(pts)), np.zeros(len(pts))
        for a, ax in enumerate(self.axes):
            others = np.ones(len(pts), dtype=bool)
            for j in range(len(on)):
                if j != a:
                    others &= on[j]
            if not others.any():
                continue
            h = np.clip(np.searchsorted(ax, pts[:, a] - EXACT_TOL), 0, ax.size - 1)
            node = tuple(h if j == a else np.where(others, lo[j], 0) for j in range(len(lo)))
            below, above = self.lines[a]
            # between two grid values, a measured node at the upper one is itself the upper
            # neighbour
            up = np.where(
                np.isfinite(self.grid[node]) & (ax[h] > pts[:, a] + EXACT_TOL), h, above[node]
            )
            v, w = self._line_estimate_between(node, a, pts[:, a], below[node], up)
            num += np.where(others, v * w, 0.0)
            den += np.where(others, w, 0.0)
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    def _line_estimate_between(
        self,
        node: tuple[np.ndarray, ...],
        axis: int,
        x: np.ndarray,
        below: np.ndarray,
        above: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(value, weight) of linear interpolation at ``x`` between nodes ``below`` and ``above`` on
        a line."""
        ok = (below >= 0) & (above >= 0)
        ax = self.axes[axis]
        lo, hi = ax[np.maximum(below, 0)], ax[np.maximum(above, 0)]
        span = np.where(ok, hi - lo, 1.0)
        t = np.clip((x - lo) / span, 0.0, 1.0)
        i_lo, i_hi = list(node), list(node)
        i_lo[axis], i_hi[axis] = np.maximum(below, 0), np.maximum(above, 0)
        val = self.grid[tuple(i_lo)] * (1.0 - t) + self.grid[tuple(i_hi)] * t
        ok &= np.isfinite(val)
        return np.where(ok, val, 0.0), np.where(ok, 1.0 / span, 0.0)

    def loo(self) -> np.ndarray:
        """Leave-one-out log-ratio of each row (input order): the mean of the other rows on its node
        when there are any, else rule 3 along the lines through its node; NaN where none brackets
        it."""
        num = np.zeros(self.node[0].size)
        den = np.zeros_like(num)
        for a in range(len(self.axes)):
            below, above = self.lines[a]
            x = self.axes[a][self.node[a]]
            v, w = self._line_estimate_between(self.node, a, x, below[self.node], above[self.node])
            num += v * w
            den += w
        lines = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        k = self.count[self.node]
        others = (self.grid[self.node] * k - self.values) / np.maximum(k - 1.0, 1.0)
        return np.where(k > 1, others, lines)


def size_coords(op: str, cols: Mapping[str, Column], n: int) -> np.ndarray:
    """(n, d) log(1 + size) coordinates of the size keys of ``op``
    (``interp_space`` for the grid's)."""
    return np.stack(
        [np.log1p(np.broadcast_to(np.asarray(cols[k], dtype=float), (n,))) for k in SIZE_KEYS[op]],
        axis=1,
    )


def category_labels(
    op: str, cols: Mapping[str, Column], n: int, keys: tuple[str, ...] | None = None
) -> np.ndarray:
    """One string label per row joining its category keys (rows with equal labels share a grid)."""
    keys = category_keys(op) if keys is None else keys
    if not keys:
        return np.zeros(n, dtype=np.int64)
    parts = [np.broadcast_to(np.asarray(cols[k]).astype(str), (n,)) for k in keys]
    if all(np.ndim(cols[k]) == 0 for k in keys):
        return np.full(n, "|".join(str(cols[k]) for k in keys), dtype=object)
    out = parts[0].astype(object)
    for p in parts[1:]:
        out = out + "|" + p.astype(object)
    return out


def _col(cols: Mapping[str, Column], key: str, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(cols[key]), (n,))


def _pooled_space(
    cols: Mapping[str, Column],
    n: int,
    units: np.ndarray,
    sizes: tuple[str, ...],
    labels: Mapping[str, Column],
) -> tuple[np.ndarray, np.ndarray]:
    """Labels joined from ``labels``; coords log1p of ``units`` then of the ``sizes`` columns."""
    lab = category_labels("", labels, n, keys=tuple(labels))
    coords = [np.log1p(units.astype(float))] + [
        np.log1p(_col(cols, k, n).astype(float)) for k in sizes
    ]
    return lab, np.stack(coords, axis=1)


def interp_space(op: str, cols: Mapping[str, Column], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, coords) of ``n`` rows: rows with equal labels share one grid over coords.

    Attention tables pool their head configurations (module docstring): decode on (batch x kv_heads,
    kv_len) per (head_dim, kv_dtype, grouped or multi-head); prefill on (batch x heads, seq, prior)
    per (head_dim, dtypes, group size heads/kv_heads, window) -- its work (FLOPs, bytes, thread
    blocks) is proportional to batch x heads at a fixed group size.
    """
    if op == "attention_decode":
        heads, kv_heads = _col(cols, "heads", n), _col(cols, "kv_heads", n)
        kind = np.where(heads == kv_heads, "mha", "gqa").astype(object)
        return _pooled_space(
            cols,
            n,
            _col(cols, "batch", n) * kv_heads,
            ("kv_len",),
            {"head_dim": cols["head_dim"], "kv_dtype": cols["kv_dtype"], "kind": kind},
        )
    if op == "attention_prefill":
        heads, kv_heads = _col(cols, "heads", n), _col(cols, "kv_heads", n)
        group = heads // np.maximum(kv_heads, 1)
        return _pooled_space(
            cols,
            n,
            _col(cols, "batch", n) * heads,
            ("seq", "prior"),
            {
                "head_dim": cols["head_dim"],
                "dtype": cols["dtype"],
                "kv_dtype": cols["kv_dtype"],
                "group": group,
                "window": cols["window"],
            },
        )
    return category_labels(op, cols, n), size_coords(op, cols, n)


def loo_log_ratio(op: str, keys: Mapping[str, np.ndarray], log_ratio: np.ndarray) -> np.ndarray:
    """Leave-one-out interpolated log-ratio of every row
    (NaN where the others do not bracket it)."""
    n = log_ratio.size
    labels, coords = interp_space(op, keys, n)
    out = np.full(n, np.nan)
    for lab in dict.fromkeys(labels.tolist()):
        mask = labels == lab
        if mask.sum() >= 3:
            out[mask] = Partition(coords[mask], log_ratio[mask]).loo()
    return out


class TableInterpolator:
    """Interpolates log(measured / model) of one table; built once per table and model."""

    def __init__(
        self, table: KernelTable, model_seconds: Callable[[Mapping[str, Column], int], np.ndarray]
    ) -> None:
        n = len(table)
        self.op = table.op
        base = model_seconds(table.keys, n)
        ratio = np.log(table.latency_s) - np.log(base)
        labels, coords = interp_space(table.op, table.keys, n)
        self.parts: dict[Hashable, Partition] = {}
        for lab in dict.fromkeys(labels.tolist()):
            mask = labels == lab
            self.parts[lab] = Partition(coords[mask], ratio[mask])

    def query(self, cols: Mapping[str, Column], n: int) -> Hit:
        """Look up ``n`` query rows (``cols`` broadcastable to ``n``)."""
        labels, coords = interp_space(self.op, cols, n)
        ratio, inside, exact = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for lab in set(labels.tolist()):
            part = self.parts.get(lab)
            if part is None:
                continue
            mask = labels == lab
            r, i, e = part.query(coords[mask])
            ratio[mask], inside[mask], exact[mask] = r, i, e
        return Hit(ratio, inside, exact)
