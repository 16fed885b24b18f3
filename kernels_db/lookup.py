"""Vectorized kernel-latency lookup: the public API the serving model calls.

    db = KernelDB.for_gpu(get_gpu("h200"))
    cost = db.price(Gemm(m=np.array([1, 64, 4096]), n=8192, k=8192, dtype="bf16"))
    cost.seconds      # float64 array, seconds
    cost.provenance   # str array, one of PROVENANCE

An op is described by a frozen dataclass of ``kernels_db.ops`` (one per op family; ``db.gemm(...)``
and its siblings are shorthands). Every column is a numpy array or a scalar (broadcast together);
every method returns a frozen ``OpCost``.
Each op is priced, in this order (the provenance tag says which):

- ``measured``: a row of this GPU's table (``kernels_db/data/<gpu>/<op>.csv``) matches exactly:
  its latency, less what its benchmark harness did that a serving step does not (the row's
  measured / model ratio is taken against the row priced as its harness ran it,
  ``harness.measured_cols``: a GEMM benchmark re-reading its weights from the L2, an FP8 harness's
  dynamic scale pass, a decode harness's KV share);
- ``interpolated``: inside the table's measured grid (log space over sizes, ``kernels_db.interp``),
  the same ratio interpolated;
- ``fitted``: the roofline with this GPU's fitted efficiencies (``kernels_db/fitted/<gpu>.yaml``);
- ``transferred:<gpu>``: the roofline with a sibling GPU's fit carried over
  (``kernels_db.transfer``), for GPUs without a fit of their own;
- ``roofline_uncalibrated``: the roofline with default efficiencies (no fit for this GPU/dtype).

Roofline: ``launch + max(FLOPs/(peak·eff_c), bytes/(BW·eff_m))`` (``kernels_db.roofline``).
Collectives: alpha-beta ``latency + bytes·algo_factor/bus_bandwidth`` (``kernels_db.comm``); one GPU
costs 0 s with provenance ``measured`` (nothing to measure). MoE and MLA borrow the GEMM and
attention fits. ``KernelDB.for_gpu`` is cached per GPU and folders.

The serving model prices the ops of a step through ``StepPricer.price_ops`` (one ``price_codes`` /
``comm_codes`` call per op family): ``price_codes`` is the one pricing function over arrays, and
``KernelDB.price``, its shorthands and ``StepPricer.price`` (one op) wrap it. ``price_ops`` with
``blocks`` prices several steps of the same ops at once (their rows end to end) and tags each
step's ops from that step's rows only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Generic, TypeVar

import numpy as np

from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from kernels_db import comm as cm
from kernels_db import costs, fitted, paths, transfer
from kernels_db import roofline as rf
from kernels_db.harness import measured_cols
from kernels_db.interp import TableInterpolator
from kernels_db.ops import (
    SHAPES,
    AttentionDecode,
    AttentionPrefill,
    Column,
    Gemm,
    KernelShape,
    Label,
    Memcpy,
    MlaDecode,
    MlaPrefill,
    Moe,
    Size,
    StepOp,
)
from kernels_db.schema import COLLECTIVES, LINKS, SIZE_KEYS
from kernels_db.tables import KernelTable, read_gpu_folder

PROVENANCE: Final[tuple[str, ...]] = ("measured", "interpolated", "fitted", "roofline_uncalibrated")
MEASURED, INTERPOLATED, FITTED, UNCALIBRATED = range(4)
_PROV = np.array(PROVENANCE)


@dataclass(frozen=True)
class OpCost:
    """Cost of a batch of ops (arrays of one broadcast shape)."""

    seconds: np.ndarray
    provenance: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray

    @property
    def tflops(self) -> np.ndarray:
        """Achieved TFLOP/s."""
        return np.asarray(self.flops / np.maximum(self.seconds, 1e-30) / 1e12)


@dataclass
class KernelDB:
    """Tables and fitted parameters of one GPU. Build with ``for_gpu`` (cached) or directly."""

    spec: GpuSpec
    tables: Mapping[str, KernelTable] = field(default_factory=dict)
    fit: fitted.FittedGpu | None = None
    transfer_from: str | None = None
    """Key of the GPU whose fit was transferred (``kernels_db.transfer``); None for an own fit."""
    _interp: dict[str, TableInterpolator] = field(default_factory=dict, repr=False)
    _params: dict[tuple[str, str], costs.ParamEntry] = field(default_factory=dict, repr=False)
    _stacks: dict[tuple[str, tuple[str, ...]], costs.ParamStack] = field(
        default_factory=dict, repr=False
    )
    _families: dict[str, tuple[Mapping[str, fitted.RooflineParams], fitted.RooflineParams]] = field(
        default_factory=dict, repr=False
    )
    _comm_prm: dict[tuple[str, int, str], tuple[fitted.CommParams, int]] = field(
        default_factory=dict, repr=False
    )
    _comm_lines: dict[int, tuple[fitted.CommParams, list[tuple[float, float]]]] = field(
        default_factory=dict, repr=False
    )

    @classmethod
    def for_gpu(
        cls, spec: GpuSpec, data_dir: Path | None = None, fitted_dir: Path | None = None
    ) -> KernelDB:
        """The tables and fit of ``spec`` (the user's data folder first, then the bundled ones,
        unless folders are given); cached per GPU and folders."""
        data_dir = data_dir or paths.tables_root(spec.key)
        fitted_dir = fitted_dir or paths.fitted_root(spec.key)
        return _load(spec, data_dir, fitted_dir)

    @property
    def labels(self) -> np.ndarray:
        """Provenance tag of each code (``PROVENANCE``; 'fitted' reads ``transferred:<gpu>`` when
        the fit is a sibling's)."""
        if self.transfer_from is None:
            return _PROV
        return np.array(
            [
                transfer.provenance_tag(self.transfer_from) if p == "fitted" else p
                for p in PROVENANCE
            ]
        )

    @property
    def calibrated(self) -> bool:
        """True when this GPU has a fit or measured tables."""
        return self.fit is not None or bool(self.tables)

    # ---- compute families -------------------------------------------------------------------
    def _family_params(
        self, op: str
    ) -> tuple[Mapping[str, fitted.RooflineParams], fitted.RooflineParams]:
        got = self._families.get(op)
        if got is None:
            fams = self.fit.families if self.fit else {}
            own, lender = fams.get(op), fams.get(fitted.BORROW.get(op, ""))
            table = (
                own.params
                if own
                else (
                    fitted.borrowed(op, dict(lender.params), self._compute_lender(op))
                    if lender
                    else {}
                )
            )
            default = transfer.default_params(self.spec, op, self.fit is not None)
            got = self._families[op] = (table, default)
        return got

    def _compute_lender(self, op: str) -> fitted.RooflineParams | None:
        """The fitted parameter set whose compute efficiency family ``op`` borrows
        (``fitted.COMPUTE_LENDER``), or None."""
        family, name = fitted.COMPUTE_LENDER.get(op, ("", ""))
        fam = self.fit.families.get(family) if self.fit else None
        return fam.params.get(name) if fam else None

    def _param_entry(self, op: str, name: str) -> costs.ParamEntry:
        """``costs.param_entry`` of family ``op``, cached per (family, parameter-set name). A GEMM
        dtype this GPU has no tensor cores for runs in its ``math_dtype`` (weight-only
        quantization): it takes that dtype's fitted efficiencies, with its own (packed) weight
        bytes."""
        entry = self._params.get((op, name))
        if entry is None:
            table, default = self._family_params(op)
            if op in ("gemm", "moe") and name not in table and name in rf.DTYPE_BYTES:
                name_math = self.spec.math_dtype(name)
                entry = costs.param_entry(table, default, name_math if name_math in table else name)
            else:
                entry = costs.param_entry(table, default, name)
            self._params[(op, name)] = entry
        return entry

    def _param_stack(self, op: str, names: tuple[str, ...]) -> costs.ParamStack:
        """``costs.stack_entries`` of the ``_param_entry`` of each of ``names``, cached per (family,
        names) as the entries are."""
        got = self._stacks.get((op, names))
        if got is None:
            got = costs.stack_entries([self._param_entry(op, n) for n in names])
            self._stacks[(op, names)] = got
        return got

    def model(
        self, op: str, cols: Mapping[str, Column]
    ) -> tuple[np.ndarray, np.ndarray, costs.Counts]:
        """(seconds, fitted-or-not mask, counts) of the roofline model alone."""
        table, default = self._family_params(op)
        factored = costs.factorize(cols)
        p, pad, found = costs.gather_params(
            table,
            default,
            costs.param_label_set(op, factored),
            lambda name: self._param_entry(op, name),
            lambda names: self._param_stack(op, names),
        )
        cnt = costs.counts(op, factored, self.spec)
        return costs.model_time(cnt, p, self.spec.hbm_bandwidth_bytes_per_s, pad), found, cnt

    def _interpolator(self, op: str) -> TableInterpolator | None:
        if op not in self.tables:
            return None
        if op not in self._interp:
            table = self.tables[op]
            # the ratio measured / model of each row prices the row as its harness ran it
            # (``harness.measured_cols``: a decode harness's KV share, a GEMM harness's weight
            # copies and FP8 scale passes), so a serving query, priced without them, does not
            # inherit them
            cols = measured_cols(table, self.spec)
            self._interp[op] = TableInterpolator(
                table, lambda c, n: np.broadcast_to(self.model(op, cols)[0], (n,))
            )
        return self._interp[op]

    def price_codes(
        self, op: KernelShape
    ) -> tuple[np.ndarray, np.ndarray, costs.Counts, tuple[int, ...]]:
        """(seconds, provenance codes = indices into ``PROVENANCE``, counts, broadcast shape) of
        ``op``: ``price`` without building string tags (the serving model's hot path). Seconds and
        codes may be read-only broadcast views."""
        family, kw = op.family, op.columns()
        for name in SIZE_KEYS[family]:
            v = kw[name]
            if (
                (v < 0).any()
                if isinstance(v, np.ndarray)
                else v < 0
                if isinstance(v, (int, float))
                else np.any(np.asarray(v) < 0)
            ):
                raise PlannerInputError(name, "sizes must be >= 0")
        shapes = {v.shape for v in kw.values() if isinstance(v, np.ndarray)}
        shape = (
            shapes.pop()
            if len(shapes) == 1
            else np.broadcast_shapes(*(np.shape(v) for v in kw.values()))
        )
        seconds, found, cnt = self.model(family, kw)
        prov = (
            np.where(found, FITTED, UNCALIBRATED)
            if found.ndim
            else np.full(shape, FITTED if found else UNCALIBRATED)
        )
        interp = self._interpolator(family)
        if interp is not None:
            n = int(np.prod(shape)) if shape else 1
            flat = {
                k: (np.broadcast_to(v, shape).reshape(n) if np.ndim(v) else v)
                for k, v in kw.items()
            }
            hit = interp.query(flat, n)
            base = np.broadcast_to(seconds, shape).reshape(n)
            seconds = np.where(hit.inside, base * np.exp(hit.log_ratio), base).reshape(shape)
            code = np.where(
                hit.exact,
                MEASURED,
                np.where(hit.inside, INTERPOLATED, np.broadcast_to(prov, shape).reshape(n)),
            )
            prov = code.reshape(shape)
        seconds = np.asarray(seconds, dtype=float)
        if seconds.shape != shape:
            seconds = np.broadcast_to(seconds, shape)
        return seconds, prov if prov.shape == shape else np.broadcast_to(prov, shape), cnt, shape

    def price(self, op: KernelShape) -> OpCost:
        """Price ``op`` (its columns are arrays broadcast together, or scalars)."""
        seconds, prov, cnt, shape = self.price_codes(op)
        return OpCost(
            seconds.astype(float),
            self.labels[prov],
            np.broadcast_to(cnt.flops, shape).astype(float),
            np.broadcast_to(cnt.nbytes, shape).astype(float),
        )

    def gemm(self, m: Size, n: Size, k: Size, dtype: Label = "bf16") -> OpCost:
        """``price`` of a ``Gemm``."""
        return self.price(Gemm(m, n, k, dtype))

    def attention_prefill(
        self,
        batch: Size,
        seq: Size,
        prior: Size,
        heads: Size,
        kv_heads: Size,
        head_dim: Size,
        dtype: Label = "bf16",
        kv_dtype: Label = "bf16",
        window: Size = 0,
    ) -> OpCost:
        """``price`` of an ``AttentionPrefill``."""
        return self.price(
            AttentionPrefill(batch, seq, prior, heads, kv_heads, head_dim, dtype, kv_dtype, window)
        )

    def attention_decode(
        self,
        batch: Size,
        kv_len: Size,
        heads: Size,
        kv_heads: Size,
        head_dim: Size,
        kv_dtype: Label = "bf16",
    ) -> OpCost:
        """``price`` of an ``AttentionDecode``."""
        return self.price(AttentionDecode(batch, kv_len, heads, kv_heads, head_dim, kv_dtype))

    def mla_prefill(
        self,
        batch: Size,
        seq: Size,
        prior: Size,
        heads: Size,
        kv_lora_rank: Size,
        rope_dim: Size,
        dtype: Label = "bf16",
    ) -> OpCost:
        """``price`` of an ``MlaPrefill``."""
        return self.price(MlaPrefill(batch, seq, prior, heads, kv_lora_rank, rope_dim, dtype))

    def mla_decode(
        self,
        batch: Size,
        kv_len: Size,
        heads: Size,
        kv_lora_rank: Size,
        rope_dim: Size,
        kv_dtype: Label = "bf16",
    ) -> OpCost:
        """``price`` of an ``MlaDecode``."""
        return self.price(MlaDecode(batch, kv_len, heads, kv_lora_rank, rope_dim, kv_dtype))

    def moe(
        self,
        tokens: Size,
        hidden: Size,
        inter: Size,
        topk: Size,
        experts: Size,
        ep: Size = 1,
        dtype: Label = "bf16",
    ) -> OpCost:
        """``price`` of a ``Moe``."""
        return self.price(Moe(tokens, hidden, inter, topk, experts, ep, dtype))

    def memcpy(self, nbytes: Size) -> OpCost:
        """``price`` of a ``Memcpy``."""
        return self.price(Memcpy(nbytes))

    def comm(self, collective: str, n_gpus: Size, nbytes: Size, link: str | None = None) -> OpCost:
        """One collective of ``nbytes`` message bytes over ``n_gpus`` ranks (see
        ``kernels_db.comm``)."""
        return comm_cost(self, collective, n_gpus, nbytes, link)


@functools.cache
def _load(spec: GpuSpec, data_dir: Path, fitted_dir: Path) -> KernelDB:
    """``KernelDB.for_gpu`` once per (GPU spec, folders)."""
    folder = paths.table_dir(spec.key, data_dir)
    tables = read_gpu_folder(folder, spec.key) if folder.is_dir() else {}
    fit, donor = transfer.fit_for(spec, fitted_dir)
    return KernelDB(spec, tables, fit, donor)


def _comm_params(db: KernelDB, collective: str, n: int, link: str) -> tuple[fitted.CommParams, int]:
    """(alpha-beta parameters, provenance code) of (collective, n GPUs, link); cached on ``db``."""
    key = (collective, n, link)
    found = db._comm_prm.get(key)
    if found is not None:
        return found
    fit = db.fit.comm if db.fit else None
    on_fabric = link in (cm.scale_up_link(db.spec), "nvls")
    prm = cm.fitted_params(fit, collective, n, db.spec) if on_fabric else None
    found = db._comm_prm[key] = (
        (prm, FITTED) if prm is not None else (cm.default_params(db.spec, n, link), UNCALIBRATED)
    )
    return found


MAX_COUNTED_GPUS: Final[int] = 1 << 16
"""``_gpu_counts`` tallies GPU counts below this with np.bincount (no sort);
larger ones are sorted."""


SMALL_COUNT: Final[int] = 64
"""``_gpu_counts`` reads arrays up to this size as Python lists (cheaper than any numpy call)."""


def _gpu_counts(n_arr: np.ndarray) -> list[int]:
    """Distinct GPU counts > 1 of ``n_arr`` (ints >= 1), ascending."""
    if not n_arr.size:
        return []
    if n_arr.size <= SMALL_COUNT:
        return sorted({n for n in n_arr.ravel().tolist() if n > 1})
    if int(n_arr.max()) < MAX_COUNTED_GPUS:
        return [int(n) for n in np.flatnonzero(np.bincount(n_arr.ravel())) if n > 1]
    return [int(n) for n in np.unique(n_arr[n_arr > 1])]


def _extra_lines(db: KernelDB, prm: fitted.CommParams) -> list[tuple[float, float]]:
    """``prm.extra_lines()``, cached on ``db`` per parameter set (its entries never change)."""
    got = db._comm_lines.get(id(prm))
    if got is None or got[0] is not prm:
        got = db._comm_lines[id(prm)] = (prm, prm.extra_lines())
    return got[1]


def _alpha_beta_params(
    db: KernelDB, collective: str, n_arr: np.ndarray, link: str
) -> tuple[Size, Size, Sequence[tuple[Size, Size]], np.ndarray]:
    """Per row: latency, bus bandwidth, the small-message lines (``CommParams.extra_lines``;
    scalars when every row has the same GPU count > 1) and provenance code; rows of one GPU get
    (0, 1) and ``MEASURED`` (they move nothing)."""
    counts = _gpu_counts(n_arr)
    if len(counts) == 1 and n_arr.size and int(n_arr.min()) == counts[0]:
        prm, code = _comm_params(db, collective, counts[0], link)
        return (
            prm.latency_s,
            prm.bus_bandwidth_bytes_per_s,
            _extra_lines(db, prm),
            np.full(n_arr.shape, code),
        )
    lat, bw = np.zeros(n_arr.shape), np.ones(n_arr.shape)
    extra = [(np.zeros(n_arr.shape), np.ones(n_arr.shape)) for _ in range(fitted.MAX_SMALL_LINES)]
    prov = np.full(n_arr.shape, MEASURED)
    for n in counts:
        prm, code = _comm_params(db, collective, n, link)
        sel = n_arr == n
        lat[sel], bw[sel], prov[sel] = prm.latency_s, prm.bus_bandwidth_bytes_per_s, code
        for (e_lat, e_bw), (x_lat, x_bw) in zip(extra, prm.extra_lines(), strict=True):
            e_lat[sel], e_bw[sel] = x_lat, x_bw
    return lat, bw, extra, prov


def comm_cost(
    db: KernelDB, collective: str, n_gpus: Size, nbytes: Size, link: str | None
) -> OpCost:
    """Collective cost: measured table inside its grid, else fitted or default alpha-beta."""
    seconds, prov, b_arr = comm_codes(db, collective, n_gpus, nbytes, link)
    return OpCost(seconds, db.labels[prov], np.zeros(b_arr.shape), b_arr)


def comm_codes(
    db: KernelDB, collective: str, n_gpus: Size, nbytes: Size, link: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, provenance codes, message bytes) of ``comm_cost`` (codes index ``PROVENANCE``)."""
    if collective not in COLLECTIVES:
        raise PlannerInputError(
            "collective", f"unknown '{collective}'; allowed: {', '.join(COLLECTIVES)}"
        )
    link = link or cm.scale_up_link(db.spec)
    if link not in LINKS:
        raise PlannerInputError("link", f"unknown '{link}'; allowed: {', '.join(LINKS)}")
    n_arr, b_arr = np.asarray(n_gpus, dtype=np.int64), np.asarray(nbytes, dtype=float)
    if n_arr.shape != b_arr.shape:
        n_arr, b_arr = np.broadcast_arrays(n_arr, b_arr)
    if (n_arr < 1).any() or (b_arr < 0).any():
        raise PlannerInputError("n_gpus", "n_gpus must be >= 1 and bytes >= 0")
    lat, bw, extra, prov = _alpha_beta_params(db, collective, n_arr, link)
    factor = cm.algo_factor(collective, n_arr, nvls=link == "nvls")
    seconds = cm.alpha_beta(b_arr, factor, lat, bw, extra)
    table = db.tables.get("comm")
    if table is not None and seconds.size:
        interp = db._interp.get("comm") or TableInterpolator(
            table, lambda c, k: _comm_model(db, c, k)
        )
        db._interp["comm"] = interp
        hit = interp.query(
            {
                "collective": collective,
                "n_gpus": n_arr.ravel(),
                "bytes": b_arr.ravel(),
                "link": link,
            },
            n_arr.size,
        )
        adj = (hit.inside & (n_arr.ravel() > 1)).reshape(n_arr.shape)
        seconds = np.where(adj, seconds * np.exp(hit.log_ratio.reshape(n_arr.shape)), seconds)
        prov = np.where(adj, np.where(hit.exact.reshape(n_arr.shape), MEASURED, INTERPOLATED), prov)
    return seconds, prov, b_arr.astype(float)


def _comm_model(db: KernelDB, cols: Mapping[str, Column], n: int) -> np.ndarray:
    """Alpha-beta model at table rows (model only, for the interpolator's ratios)."""
    out = np.empty(n)
    coll = np.broadcast_to(np.asarray(cols["collective"]).astype(str), (n,))
    gpus = np.broadcast_to(np.asarray(cols["n_gpus"]), (n,))
    links = np.broadcast_to(np.asarray(cols["link"]).astype(str), (n,))
    nbytes = np.broadcast_to(np.asarray(cols["bytes"], dtype=float), (n,))
    for c, g, lk in set(zip(coll.tolist(), gpus.tolist(), links.tolist(), strict=True)):
        sel = (coll == c) & (gpus == g) & (links == lk)
        prm, _ = (
            _comm_params(db, c, int(g), lk)
            if g > 1
            else (fitted.CommParams(latency_s=1e-6, bus_bandwidth_bytes_per_s=1e9), 0)
        )
        factor = cm.algo_factor(c, np.full(int(sel.sum()), max(int(g), 2)))
        out[sel] = cm.params_time(nbytes[sel], factor, prm)
    return out


# ---- the ops of a serving step ---------------------------------------------------------------
OpT = TypeVar("OpT", bound=StepOp)
MESSAGE_DIVIDED: Final[frozenset[str]] = frozenset({"memcpy"})
"""Families whose op bytes are split over ``StepOp.kernels`` equal kernels (priced one each, times
kernels)."""


class StepPricer(Generic[OpT]):
    """Prices the ops of one serving step on one GPU (``planner.perf.step`` calls ``price_ops``).

    The ops of one kernels_db family (attention and MLP GEMMs and the LM head; the two all-reduces)
    go into one ``price_codes`` / ``comm_codes`` call for all K candidates, with provenance kept as
    integer codes until each op's tag is read off its rows. An op reports the weakest provenance
    among its K candidates (a solver sweep mixes fitted dtypes with unfitted ones; the tag must not
    overstate the evidence). ``price`` of one op is ``price_ops`` of a list of one: there is one
    pricing path.

    * Grouped expert GEMMs: priced at the shape the op gives (``planner.perf.opgraph.moe_ops``
    gives the
      busiest EP rank's load: the step waits for the slowest rank).
    * Collectives: one message per kernel (dispatch + combine for all-to-all), over the scale-up
      link inside the domain and the NIC ("ib") beyond it; an all-reduce inside the domain takes the
      faster of NCCL and the engines' custom all-reduce (``comm.CUSTOM_ALL_REDUCE``).
    * Ops with no work (no prefill tokens in a decode-only step) cost 0 s, not a kernel launch.
    * Ops without a kernels_db family (linear-attention recurrences) are priced by ``fallback``
      (seconds per instance), tagged ``roofline_uncalibrated``.
    """

    def __init__(self, db: KernelDB, fallback: Callable[[OpT], np.ndarray]) -> None:
        self.db = db
        self.fallback = fallback
        self.link = cm.scale_up_link(db.spec)

    def price(self, op: OpT) -> tuple[np.ndarray, str]:
        """Seconds per instance of ``op`` (shape (K,)) and its provenance."""
        return self.price_ops([op])[0]

    def price_ops(self, ops: Sequence[OpT], blocks: int = 1) -> list[tuple[np.ndarray, str]]:
        """(seconds per instance, provenance) of every op of ``ops``, each kernels_db family and
        each collective in one lookup.

        ``blocks`` > 1: the rows of every op are that many steps end to end (equal blocks of rows,
        e.g. several step mixes of one worker tiled); the answer is then each block's answer in
        turn (``len(ops) * blocks`` entries, block by block), each op's provenance the weakest of
        that block's rows only, as if each block had been priced on its own (a row's seconds and
        provenance code do not depend on the other rows)."""
        n_ops = len(ops)
        out: list[tuple[np.ndarray, str]] = [(np.zeros(0), "")] * (n_ops * blocks)
        groups: dict[str, list[int]] = {}
        for i, op in enumerate(ops):
            key = "comm:" + op.collective if op.family == "comm" else _family(op)
            if not key:
                t = np.where(_busy(op), self.fallback(op), 0.0)
                for b, part in enumerate(_split(t, blocks)):
                    out[b * n_ops + i] = (part, PROVENANCE[UNCALIBRATED])
            else:  # ops whose work is not one row per candidate are priced alone
                groups.setdefault(key if _rows(op) >= 0 else f"{key}#{i}", []).append(i)
        for key, idx in groups.items():
            sub = [ops[i] for i in idx]
            sizes = [_rows(op) for op in sub]
            t, tags = (
                self._comm_many(sub, sizes, blocks)
                if key.startswith("comm:")
                else self._compute_many(_family(sub[0]), sub, sizes, blocks)
            )
            if len(sub) == 1:
                t = np.where(_busy(sub[0]), t, 0.0)
                if blocks == 1:
                    out[idx[0]] = (t, tags[0])
                    continue
                for b, part in enumerate(_split(t, blocks)):
                    out[b * n_ops + idx[0]] = (part, tags[b])
                continue
            busy = (np.concatenate([op.flops for op in sub]) > 0) | (
                np.concatenate([op.nbytes for op in sub]) > 0
            )
            t = np.where(busy, t, 0.0)
            a = 0
            for j, (i, k) in enumerate(zip(idx, sizes, strict=True)):
                if blocks == 1:
                    out[i] = (t[a : a + k], tags[j])
                else:
                    for b, part in enumerate(_split(t[a : a + k], blocks)):
                        out[b * n_ops + i] = (part, tags[j * blocks + b])
                a += k
        return out

    def _compute_many(
        self, family: str, ops: Sequence[OpT], sizes: list[int], blocks: int = 1
    ) -> tuple[np.ndarray, list[str]]:
        """Ops of one kernels_db family in one ``price_codes`` call: seconds of all their rows end
        to end, and each op's provenance tag (each op's tag of each of ``blocks`` row blocks in
        turn when ``blocks`` > 1)."""
        shape = ops[0].shape
        if len(ops) > 1 or shape is None:
            shapes = [op.shape.columns() for op in ops if op.shape is not None]
            cols = {k: _concat([s[k] for s in shapes], sizes) for k in shapes[0]}
            shape = SHAPES[family](**cols)
        t, codes, _, _ = self.db.price_codes(shape)
        if family in MESSAGE_DIVIDED:
            reps = [op.kernels for op in ops]
            t = t * (reps[0] if len(set(reps)) == 1 else np.repeat(reps, sizes))
        if sizes == [-1]:
            codes, sizes = codes.ravel(), [codes.size]
        return t, _tags(codes, _blocked(sizes, blocks), self.db.labels)

    def _comm_many(
        self, ops: Sequence[OpT], sizes: list[int], blocks: int = 1
    ) -> tuple[np.ndarray, list[str]]:
        """Collectives of one kind, priced in one ``comm_codes`` call per link: seconds of all
        their rows end to end (0 for rows of one GPU), and each op's provenance tag (per row block
        as in ``_compute_many``)."""
        n = _rows_of([_per_row(op.n_gpus, op) for op in ops])
        rows = [np.size(op.nbytes) for op in ops]
        collective = ops[0].collective
        t, codes = np.zeros(n.shape), np.zeros(n.shape, dtype=np.int64)
        if collective != "none" and (n > 1).any():
            span = (
                n
                if all(op.spread() is op.n_gpus for op in ops)
                else _rows_of([_per_row(op.spread(), op) for op in ops])
            )
            kernels = np.repeat([op.kernels for op in ops], rows)
            message = np.concatenate([np.ravel(op.nbytes / op.kernels) for op in ops])
            if collective == "all_to_all":  # op bytes already exclude the rank's own share
                message = message / np.maximum(1.0 - 1.0 / np.maximum(n, 1.0), 1e-9)
            t, codes, n_int = self._comm_rows(collective, n, message, kernels, span)
            # single-GPU rows move nothing: they do not weaken the tag
            codes = np.where(n_int > 1, codes, 0)
        if len(ops) == 1:  # also one op priced alone: rows of its bytes, flattened, reshaped
            t = t.reshape(np.shape(ops[0].nbytes))
            return t, _tags(codes, _blocked(rows, blocks), self.db.labels)
        return t, _tags(codes, _blocked(sizes, blocks), self.db.labels)

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
        inside = span <= self.db.spec.scale_up.domain_size
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
                        seconds, comm_codes(self.db, cm.CUSTOM_ALL_REDUCE, n_sel, m_sel, link)[0]
                    )
                if whole:
                    t, codes = seconds * kernels, c
                else:
                    t[sel], codes[sel] = seconds * kernels[sel], c
        return t, codes, n_int


def _family(op: StepOp) -> str:
    """kernels_db family of ``op``'s kernel; '' when it has none."""
    return op.shape.family if op.shape is not None else ""


def _busy(op: StepOp) -> np.ndarray:
    """Rows of ``op`` that do any work."""
    return np.asarray((np.asarray(op.flops) > 0) | (np.asarray(op.nbytes) > 0))


def _per_row(value: np.ndarray | float, op: StepOp) -> np.ndarray:
    """``value`` as floats, one per row of ``op``'s bytes (flattened)."""
    if (
        isinstance(value, np.ndarray)
        and value.dtype == np.float64
        and value.shape == np.shape(op.nbytes)
    ):
        return value.ravel()
    return np.broadcast_to(np.asarray(value, dtype=float), np.shape(op.nbytes)).ravel()


def _rows_of(parts: list[np.ndarray]) -> np.ndarray:
    """``parts`` end to end (the one part itself when there is one)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _rows(op: StepOp) -> int:
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


def _blocked(sizes: list[int], blocks: int) -> list[int]:
    """Each of ``sizes`` rows cut into ``blocks`` equal blocks (``StepPricer.price_ops``)."""
    if blocks == 1:
        return sizes
    if any(k % blocks for k in sizes):
        raise ValueError(f"rows {sizes} do not split into {blocks} equal blocks")
    return [k // blocks for k in sizes for _ in range(blocks)]


def _split(t: np.ndarray, blocks: int) -> list[np.ndarray]:
    """``t`` cut along its first axis into ``blocks`` equal parts (views)."""
    if blocks == 1:
        return [t]
    k, rest = divmod(int(np.shape(t)[0]) if np.ndim(t) else 0, blocks)
    if rest or not np.ndim(t):
        raise ValueError(f"shape {np.shape(t)} does not split into {blocks} equal blocks")
    return [t[b * k : (b + 1) * k] for b in range(blocks)]


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


def _tags(codes: np.ndarray, sizes: list[int], labels: np.ndarray) -> list[str]:
    """Weakest provenance (``PROVENANCE`` order: the highest code) of each block of ``sizes`` rows,
    as ``labels`` names the codes (``KernelDB.labels``: a transferred fit's tag for 'fitted')."""
    if not codes.size:
        return [str(labels[0])] * len(sizes)
    lo, hi = int(codes.min()), int(codes.max())
    if lo == hi:
        return [str(labels[hi])] * len(sizes)
    starts = np.cumsum([0, *sizes[:-1]])
    return [
        str(labels[int(c)]) if k else str(labels[0])
        for c, k in zip(np.maximum.reduceat(codes, starts), sizes, strict=True)
    ]
