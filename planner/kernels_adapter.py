"""Price the ops of :mod:`planner.opgraph` through ``kernels_db`` (vectorized, with provenance).

Each op carries its kernel shape (``Op.shape``, a ``kernels_db.ops`` description whose class names
the kernels_db family, ``Op.lookup``); this adapter calls ``KernelDB.for_gpu(gpu).price(shape)``
once per op for all K candidates, so every op records where its time came from: ``measured`` /
``interpolated`` (a table of this GPU), ``fitted`` (this GPU's fitted efficiency roofline,
``kernels_db/fitted/<gpu>.yaml``) or ``roofline_uncalibrated``. Ops without a kernels_db family
(linear-attention recurrences) fall back to :class:`planner.step_model.RooflinePricer`, tagged
``roofline_uncalibrated``.

Adapter choices (kernels_db's API is used as is, nothing in kernels_db is changed):

* An op reports the weakest provenance among its K candidates (a solver sweep mixes fitted dtypes
  with unfitted ones; the tag must not overstate the evidence).
* Grouped expert GEMMs: kernels_db prices the balanced load; the busiest EP rank's load factor
  (``opgraph.moe_imbalance``) multiplies the time (the step waits for the slowest rank).
* Collectives: one message per kernel (``Op.kernels``: dispatch + combine for all-to-all), over the
  scale-up link inside the domain and the NIC ("ib") beyond it; an all-reduce inside the domain
  takes the faster of NCCL and the custom all-reduce (``CUSTOM_ALL_REDUCE``).
* Ops with no work (no prefill tokens in a decode-only step) cost 0 s, not a kernel launch.

``price_ops`` prices a whole step: the ops of one kernels_db family (attention and MLP GEMMs and the
LM head; the two all-reduces) are concatenated into one lookup, with provenance kept as integer
codes until each op's tag is read off its rows. Every row is priced by the same elementwise formulas
as ``price``, so the two agree exactly; only the per-call overhead is saved.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from hardware.spec import GpuSpec
from kernels_db.comm import CUSTOM_ALL_REDUCE, scale_up_link
from kernels_db.lookup import PROVENANCE, KernelDB, comm_codes
from kernels_db.ops import SHAPES, Column, Memcpy
from planner.opgraph import Op
from planner.step_model import RooflinePricer

UNCALIBRATED = "roofline_uncalibrated"
MESSAGE_DIVIDED: frozenset[str] = frozenset({"memcpy"})
"""Families whose op bytes are split over ``Op.kernels`` equal kernels
(priced one each, times kernels)."""
PROVENANCE_RANK: dict[str, int] = {p: i for i, p in enumerate(PROVENANCE)}
# Inside the scale-up domain a TP all-reduce costs the faster of NCCL and the engine's custom
# all-reduce (``kernels_db.comm.CUSTOM_ALL_REDUCE``; vLLM ``custom_all_reduce`` up to 8 MB,
# TensorRT-LLM ``AllReduceStrategy.AUTO``, SGLang custom AR): ~4 us instead of NCCL's ~20 us for
# decode-sized messages on 8xH200 (kernels_db comm fit of aiconfigurator's custom_allreduce_perf
# and nccl_perf tables).


def weakest(tags: np.ndarray) -> str:
    """The least calibrated provenance tag among ``tags``
    (order of ``kernels_db.lookup.PROVENANCE``)."""
    known = np.zeros(np.shape(tags), dtype=bool)
    found = []
    for tag in PROVENANCE:  # a few vectorized comparisons: far cheaper than np.unique on K strings
        hit = tags == tag
        known |= hit
        if hit.any():
            found.append(tag)
    if (
        not known.all()
    ):  # a transferred fit ranks with 'fitted': only the default roofline is weaker
        return UNCALIBRATED if UNCALIBRATED in found else str(np.asarray(tags)[~known][0])
    return max(found, key=PROVENANCE_RANK.__getitem__)


class KernelDbPricer:
    """:class:`planner.step_model.OpPricer` backed by ``kernels_db`` for one GPU."""

    def __init__(self, gpu: GpuSpec) -> None:
        self.gpu = gpu
        self.db = KernelDB.for_gpu(gpu)
        self.fallback = RooflinePricer(gpu)
        self.link = scale_up_link(gpu)

    def price(self, op: Op) -> tuple[np.ndarray, str]:
        """Seconds per instance of ``op`` (shape (K,)) and its provenance: one op alone, through
        kernels_db's public API (the reference that ``price_ops`` is tested against)."""
        busy = (np.asarray(op.flops) > 0) | (np.asarray(op.nbytes) > 0)
        if op.family == "comm":
            t, tag = self._comm(op)
        elif not op.lookup:
            t, tag = self.fallback.price(op)[0], UNCALIBRATED
        else:
            t, tag = self._compute(op)
        return np.where(busy, t, 0.0), tag

    def _compute(self, op: Op) -> tuple[np.ndarray, str]:
        assert op.shape is not None
        scale = np.asarray(op.imbalance, dtype=float)
        shape = op.shape
        if isinstance(shape, Memcpy):
            shape = Memcpy(np.asarray(shape.bytes, dtype=float))
        cost = self.db.price(shape)
        reps = op.kernels if op.lookup in MESSAGE_DIVIDED else 1.0
        return cost.seconds * scale * reps, weakest(cost.provenance)

    def _comm(self, op: Op) -> tuple[np.ndarray, str]:
        n = np.broadcast_to(np.asarray(op.n_gpus, dtype=float), np.shape(op.nbytes))
        if op.collective == "none" or not np.any(n > 1):
            return np.zeros(np.shape(op.nbytes)), PROVENANCE[0]
        span = np.broadcast_to(np.asarray(op.spread(), dtype=float), np.shape(op.nbytes))
        inside = span <= self.gpu.scale_up.domain_size
        message = op.nbytes / op.kernels
        if op.collective == "all_to_all":  # op bytes already exclude the rank's own share
            message = message / np.maximum(1.0 - 1.0 / np.maximum(n, 1.0), 1e-9)
        n_int = np.maximum(np.round(n), 1).astype(np.int64)
        t = np.zeros(np.shape(op.nbytes))
        tags: list[np.ndarray] = []
        for link, sel in ((self.link, inside), ("ib", ~inside)):
            if sel.any():
                c = self.db.comm(op.collective, n_int[sel], message[sel], link)
                seconds = c.seconds
                if op.collective == "all_reduce" and link == self.link:
                    # engines pick the faster of NCCL and their custom (one-/two-shot) all-reduce
                    seconds = np.minimum(
                        seconds,
                        self.db.comm(CUSTOM_ALL_REDUCE, n_int[sel], message[sel], link).seconds,
                    )
                t[sel] = seconds * op.kernels
                tags.append(c.provenance[n_int[sel] > 1])
        moved = np.concatenate(tags) if tags else np.array([PROVENANCE[0]])
        return t, weakest(moved) if moved.size else PROVENANCE[0]

    def price_ops(self, ops: Sequence[Op]) -> list[tuple[np.ndarray, str]]:
        """``price`` of every op of ``ops``, each kernels_db family
        (and collective) in one lookup."""
        out: list[tuple[np.ndarray, str]] = [(np.zeros(0), "")] * len(ops)
        groups: dict[str, list[int]] = {}
        for i, op in enumerate(ops):
            key = "comm:" + op.collective if op.family == "comm" else op.lookup
            if key and _rows(op) >= 0:
                groups.setdefault(key, []).append(i)
            else:
                out[i] = self.price(op)
        for key, idx in groups.items():
            sub = [ops[i] for i in idx]
            sizes = [_rows(op) for op in sub]
            t, tags = (
                self._comm_many(sub, sizes)
                if key.startswith("comm:")
                else self._compute_many(key, sub, sizes)
            )
            if len(sub) == 1:
                busy = (sub[0].flops > 0) | (sub[0].nbytes > 0)
            else:
                busy = (np.concatenate([op.flops for op in sub]) > 0) | (
                    np.concatenate([op.nbytes for op in sub]) > 0
                )
            t = np.where(busy, t, 0.0)
            a = 0
            for i, k, tag in zip(idx, sizes, tags, strict=True):
                out[i] = (t[a : a + k], tag)
                a += k
        return out

    def _compute_many(
        self, family: str, ops: Sequence[Op], sizes: list[int]
    ) -> tuple[np.ndarray, list[str]]:
        """``_compute`` of ops of one kernels_db family in one ``price_codes`` call: seconds of all
        their rows end to end, and each op's provenance tag."""
        shapes = [op.shape.columns() for op in ops if op.shape is not None]
        scale = _concat([op.imbalance for op in ops], sizes)
        cols = (
            shapes[0]
            if len(ops) == 1
            else {k: _concat([s[k] for s in shapes], sizes) for k in shapes[0]}
        )
        seconds, codes, _, _ = self.db.price_codes(SHAPES[family](**cols))
        t = (
            seconds if _is_one(scale) else seconds * np.asarray(scale, dtype=float)
        )  # x * 1.0 == x exactly
        if family in MESSAGE_DIVIDED:
            reps = [op.kernels for op in ops]
            t = t * (reps[0] if len(set(reps)) == 1 else np.repeat(reps, sizes))
        return t, _tags(codes, sizes, self.db.labels)

    def _comm_many(self, ops: Sequence[Op], sizes: list[int]) -> tuple[np.ndarray, list[str]]:
        """``_comm`` of collectives of one kind, priced in one ``comm_codes`` call per link: seconds
        of all their rows end to end (0 for rows of one GPU), and each op's provenance tag."""
        n = np.concatenate(
            [
                np.broadcast_to(np.asarray(op.n_gpus, dtype=float), (k,))
                for op, k in zip(ops, sizes, strict=True)
            ]
        )
        collective = ops[0].collective
        if collective == "none" or not (n > 1).any():
            return np.zeros(n.shape), [PROVENANCE[0]] * len(ops)
        kernels = np.repeat([op.kernels for op in ops], sizes)
        message = np.concatenate([op.nbytes / op.kernels for op in ops])
        if collective == "all_to_all":  # op bytes already exclude the rank's own share
            message = message / np.maximum(1.0 - 1.0 / np.maximum(n, 1.0), 1e-9)
        span = np.concatenate(
            [
                np.broadcast_to(np.asarray(op.spread(), dtype=float), (k,))
                for op, k in zip(ops, sizes, strict=True)
            ]
        )
        t, codes, n_int = self._comm_rows(collective, n, message, kernels, span)
        codes = np.where(
            n_int > 1, codes, 0
        )  # single-GPU rows move nothing: they do not weaken the tag
        return t, _tags(codes, sizes, self.db.labels)

    def _comm_rows(
        self,
        collective: str,
        n: np.ndarray,
        message: np.ndarray,
        kernels: np.ndarray,
        span: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(seconds, provenance codes, GPU counts) per row: scale-up link when the members lie
        inside one domain (``span`` GPUs), NIC beyond."""
        inside = span <= self.gpu.scale_up.domain_size
        n_int = np.maximum(np.round(n), 1).astype(np.int64)
        links = [(self.link, inside)] if inside.all() else [(self.link, inside), ("ib", ~inside)]
        t, codes = np.zeros(n.shape), np.zeros(n.shape, dtype=np.int64)
        for link, sel in links:
            if sel.any():
                whole = len(links) == 1
                n_sel, m_sel = (n_int, message) if whole else (n_int[sel], message[sel])
                seconds, c, _ = comm_codes(self.db, collective, n_sel, m_sel, link)
                if collective == "all_reduce" and link == self.link:
                    # engines pick the faster of NCCL and their custom (one-/two-shot) all-reduce
                    seconds = np.minimum(
                        seconds, comm_codes(self.db, CUSTOM_ALL_REDUCE, n_sel, m_sel, link)[0]
                    )
                if whole:
                    t, codes = seconds * kernels, c
                else:
                    t[sel], codes[sel] = seconds * kernels[sel], c
        return t, codes, n_int


def _rows(op: Op) -> int:
    """Candidates K of an op whose work arrays have shape (K,); -1 otherwise (priced alone)."""
    flops, nbytes = op.flops, op.nbytes
    if (
        isinstance(flops, np.ndarray)
        and isinstance(nbytes, np.ndarray)
        and nbytes.ndim == 1
        and flops.shape == nbytes.shape
    ):
        return int(nbytes.shape[0])
    return -1


def _is_one(v: object) -> bool:
    """True for the scalar 1 (a factor that leaves every row as it is)."""
    return not isinstance(v, np.ndarray) and bool(v == 1.0)


def _concat(values: Sequence[Column], sizes: list[int]) -> Column:
    """One key column of several ops: a shared scalar stays scalar, else rows end to end."""
    first = values[0]
    if not isinstance(first, np.ndarray) and all(
        not isinstance(v, np.ndarray) and v == first for v in values
    ):
        return first
    return np.concatenate(
        [
            v
            if isinstance(v, np.ndarray) and v.shape == (k,)
            else np.full(k, v)
            if np.ndim(v) == 0
            else np.broadcast_to(np.asarray(v), (k,))
            for v, k in zip(values, sizes, strict=True)
        ]
    )


def _tags(
    codes: np.ndarray, sizes: list[int], labels: Sequence[str] | np.ndarray = PROVENANCE
) -> list[str]:
    """Weakest provenance (``PROVENANCE`` order: the highest code) of each block of ``sizes`` rows,
    as ``labels`` names the codes (``KernelDB.labels``: a transferred fit's tag for 'fitted')."""
    if not codes.size:
        return [labels[0]] * len(sizes)
    lo, hi = int(codes.min()), int(codes.max())
    if lo == hi:
        return [str(labels[hi])] * len(sizes)
    starts = np.cumsum([0, *sizes[:-1]])
    return [
        str(labels[int(c)]) if k else str(labels[0])
        for c, k in zip(np.maximum.reduceat(codes, starts), sizes, strict=True)
    ]


@functools.lru_cache(maxsize=64)
def default_pricer(gpu: GpuSpec) -> KernelDbPricer:
    """The kernels_db pricer of ``gpu``, cached per GPU spec (``hardware.frozen.FrozenSpec``)."""
    return KernelDbPricer(gpu)
