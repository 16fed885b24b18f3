"""Fit named efficiency parameters per op family to measured tables (scipy least squares on
log-latency, so every row weighs by its relative error). Reproducible: deterministic start points.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import numpy as np
from scipy.optimize import least_squares

from hardware.spec import GpuSpec
from kernels_db import comm as cm
from kernels_db import costs
from kernels_db.fitted import (
    DEFAULT_PARAMS,
    MAX_SMALL_LINES,
    CommFamilyFit,
    CommLine,
    CommParams,
    FitError,
    FittedGpu,
    FittedTo,
    RooflineFamilyFit,
    RooflineParams,
)
from kernels_db.harness import measured_cols
from kernels_db.tables import KernelTable

ROOFLINE_FAMILIES: Final[tuple[str, ...]] = (
    "gemm",
    "attention_prefill",
    "attention_decode",
    "mla_prefill",
    "mla_decode",
    "moe",
    "memcpy",
)
PARAM_BOUNDS: Final[dict[str, tuple[float, float, str]]] = {
    # name: (lowest, highest, unit and reason); the fit searches the logarithm within these
    "launch_s": (1e-7, 2e-4, "s; a kernel launch and tail, 0.1 us to 200 us"),
    "compute_eff": (0.01, 1.0, "share of the dense peak FLOP/s of the dtype, 1% to 100%"),
    "compute_half_flops": (1.0, 1e13, "FLOP at which compute efficiency is half its maximum"),
    "memory_eff": (0.01, 1.0, "share of the spec DRAM bandwidth, 1% to 100%"),
    "memory_half_bytes": (1.0, 1e10, "bytes at which bandwidth efficiency is half its maximum"),
    "pad_rows": (0.01, 1e5, "rows (GEMM m, attention keys) of tile padding on average"),
    "parallel_half_units": (
        1e-3,
        1e4,
        "work units at which the SMs are half busy (decode: units that fill the memory system)",
    ),
    "cache_speedup": (1.0, 10.0, "x DRAM; L2 vs DRAM bandwidth, ~5.5 vs 0.86 TB/s on L40S"),
    "tile_s": (1e-12, 1e-6, "s per thread-block tile averaged over the SMs"),
    "gemv_memory_eff": (
        0.01,
        1.0,
        "share of the spec DRAM bandwidth a single-row (m = 1) matrix-vector kernel reaches, 1% to "
        "100% (its cached share read cache_speedup times faster)",
    ),
    "gemv_launch_s": (1e-7, 2e-4, "s; that matrix-vector kernel's fixed cost, 0.1 us to 200 us"),
    "cache_cliff_power": (
        2.0,
        32.0,
        "steepness of the L2 residency 1 / (1 + (working set / L2)^power) of a benchmark's cyclic "
        "sweep; 2 = gradual, 32 = all or nothing at the cache size (a 16-way LRU cache ~14)",
    ),
}
"""Bounds of every fitted ``RooflineParams`` value (``planner calibrate fit --gpu GPU --tables DIR``
fits them; ``kernels_db/fitted/*.yaml`` record the command)."""
PARAM_ORDER: Final[tuple[str, ...]] = tuple(PARAM_BOUNDS)
EXTRA: Final[tuple[str, ...]] = ("gemv_memory_eff", "gemv_launch_s", "cache_cliff_power")
"""GEMM terms fitted after the others (``fit_roofline_params``); last in ``PARAM_ORDER``."""
N_BASE: Final[int] = len(PARAM_ORDER) - len(EXTRA)
GEMV_TERM: Final[tuple[int, ...]] = (
    PARAM_ORDER.index("gemv_memory_eff"),
    PARAM_ORDER.index("gemv_launch_s"),
)
CLIFF_TERM: Final[tuple[int, ...]] = (PARAM_ORDER.index("cache_cliff_power"),)
LOWER_LIN: Final[np.ndarray] = np.array([v[0] for v in PARAM_BOUNDS.values()])
LOWER: Final[np.ndarray] = np.log([v[0] for v in PARAM_BOUNDS.values()])
UPPER: Final[np.ndarray] = np.log([v[1] for v in PARAM_BOUNDS.values()])
PADDED: Final[frozenset[str]] = frozenset({"gemm", "attention_prefill", "attention_decode"})
OCCUPANCY: Final[frozenset[str]] = frozenset({"attention_decode", "attention_prefill", "gemm"})
TILED: Final[frozenset[str]] = frozenset({"attention_prefill", "attention_decode"})
SPLIT_KV: Final[frozenset[str]] = frozenset(
    {"attention_decode"}
)  # split-KV tried on and off  # a fixed cost per tile
CACHED: Final[frozenset[str]] = frozenset(
    {"gemm", "attention_decode", "attention_prefill"}
)  # read a re-usable working set
GEMV: Final[frozenset[str]] = frozenset({"gemm"})  # a single row may run a matrix-vector kernel
CLIFF: Final[frozenset[str]] = frozenset(
    {"gemm"}
)  # the harness's working set is known (``harness.gemm_working_set``): its cliff is fitted
CLIFF_STARTS: Final[tuple[float, ...]] = (4.0, 16.0)
GEMV_START_GAIN: Final[float] = 1.1
GEMV_START_S: Final[float] = 5e-6
PAD_STARTS: Final[tuple[float, ...]] = (1.0, 64.0, 4096.0)  # several starts: the max() has kinks
UNIT_STARTS: Final[dict[str, tuple[float, ...]]] = {
    "attention_decode": (1.0, 16.0, 128.0),  # units to fill the memory system (streams)
    "attention_prefill": (0.1, 4.0, 64.0),  # tiles at which the SMs are half busy
    "gemm": (0.1, 16.0),
}
CACHE_STARTS: Final[tuple[float, ...]] = (2.0, 8.0)
ROBUST_SCALE: Final[float] = 0.1  # soft-L1 loss: residuals past ~10% count linearly (outliers)
N_PARAMS: Final[int] = len(PARAM_BOUNDS)
TILE_START_S: Final[float] = 1e-8
# The custom (one-/two-shot) all-reduce table is fitted on every size: engines run their own kernel
# for small messages and hand larger ones to NCCL (TensorRT-LLM ``AllReduceStrategy.AUTO``; vLLM
# ``custom_all_reduce`` below a few MB), and aiconfigurator's custom_allreduce_perf rows match
# nccl_perf from ~4 MB up (H100 TP8 16 MB: 122 vs 121 us). One alpha-beta line through all sizes
# averaged the two and came out 2-3x too cheap at 0.25-4 MB, so it was fitted below 1 MB only;
# the fastest-of-several-lines model (``fit_comm_params``) follows both regimes.
MIN_BUS_FRACTION: Final[float] = 0.25
"""A (collective, GPU count) whose largest measured message reaches a bus bandwidth below this share
of the scale-up link's spec bandwidth is not a working fabric's number and is left out of the fit;
pricing then uses the nearest fitted GPU count (``comm.fitted_params``). Bus bandwidth is the
per-link figure that ring algorithms keep at any GPU count (nccl-tests doc/PERFORMANCE.md), and
every NVLink table reaches 50-65% of the link; aiconfigurator's L40S nccl/custom all-reduce tables
reach 60% of PCIe Gen4 x16 at 2 GPUs but 16% at 4 and 4.6% at 8 (about 1.5 GB/s, flagged suspicious
in shared/validation/README.md), which priced TP8 L40S at a fifth of the measured throughput."""


def ape_pct(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Absolute percentage error of each prediction."""
    return np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0) * 100.0


def fit_error(predicted: np.ndarray, measured: np.ndarray) -> FitError:
    """Median and p90 APE."""
    e = ape_pct(predicted, measured)
    if e.size == 0:
        return FitError(n=0, median_ape_pct=0.0, p90_ape_pct=0.0)
    return FitError(
        n=int(e.size),
        median_ape_pct=round(float(np.median(e)), 2),
        p90_ape_pct=round(float(np.percentile(e, 90)), 2),
    )


def _free(op: str) -> np.ndarray:
    """Indices of the parameters fitted for ``op`` (the others stay 0)."""
    idx = [0, 1, 2, 3, 4] + ([5] if op in PADDED else []) + ([6] if op in OCCUPANCY else [])
    idx += ([7] if op in CACHED else []) + ([8] if op in TILED else [])
    return np.array(
        idx + (list(GEMV_TERM) if op in GEMV else []) + (list(CLIFF_TERM) if op in CLIFF else [])
    )


def _as_model_array(v: np.ndarray) -> np.ndarray:
    """``PARAM_ORDER`` values and the split flag (last) as ``RooflineParams.as_array`` (no
    ``pad_rows``; the split flag after ``tile_s``)."""
    m = np.delete(v, 5)
    return np.concatenate([m[:8], m[-1:], m[8:-1]])


def _params_from(v: np.ndarray) -> RooflineParams:
    r = dict(zip(PARAM_ORDER, (float(f"{x:.4g}") for x in v), strict=True))
    r["cache_speedup"] = max(r["cache_speedup"], 1.0)
    extra = {name: (r.pop(name) or None) for name in EXTRA}  # 0: the term is off (none shipped)
    return RooflineParams(**r, **extra)


def _starts(op: str) -> list[np.ndarray]:
    """Start points of the base fit (every parameter but ``EXTRA``, which start at 0 = off)."""
    d = DEFAULT_PARAMS[op]
    base = np.log(
        [
            d.launch_s,
            d.compute_eff,
            max(d.compute_half_flops, 1.0),
            d.memory_eff,
            max(d.memory_half_bytes, 1.0),
            1.0,
            1.0,
            1.0,
            TILE_START_S,
        ]
    )
    out = []
    for pad0, units0, cache0 in itertools.product(
        PAD_STARTS if op in PADDED else (1.0,),
        UNIT_STARTS.get(op, (1.0,)),
        CACHE_STARTS if op in CACHED else (1.0,),
    ):
        x = base.copy()
        x[5], x[6], x[7] = np.log(pad0), np.log(units0), np.log(cache0)
        out.append(np.clip(x, LOWER[:N_BASE] + 1e-9, UPPER[:N_BASE] - 1e-9))
    return out


def _extra_starts(base: np.ndarray) -> list[np.ndarray]:
    """Start points of ``EXTRA`` (log values) after the base fit ``base`` (``PARAM_ORDER``): the
    GEMV path ``GEMV_START_GAIN`` above the tiled GEMM's bandwidth share, so that it prices the
    large single rows from the start (a path the minimum never picks has no gradient), at the
    tiled GEMM's fixed cost or ``GEMV_START_S``; the cliff at each of ``CLIFF_STARTS``."""
    out = []
    eff0 = min(max(base[3] * GEMV_START_GAIN, LOWER_LIN[9]), 1.0)
    for launch0, cliff0 in itertools.product(
        sorted({max(base[0], LOWER_LIN[10]), GEMV_START_S}), CLIFF_STARTS
    ):
        x = np.log([eff0, launch0, cliff0])
        out.append(np.clip(x, LOWER[N_BASE:] + 1e-9, UPPER[N_BASE:] - 1e-9))
    return out


def _least_squares(
    resid: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, free: np.ndarray
) -> tuple[float, np.ndarray]:
    res = least_squares(
        resid,
        x0[free],
        bounds=(LOWER[free], UPPER[free]),
        loss="soft_l1",
        f_scale=ROBUST_SCALE,
    )
    return float(res.cost), np.asarray(res.x)


def fit_roofline_params(
    op: str, cnt: costs.Counts, latency_s: np.ndarray, bw: float
) -> RooflineParams:
    """Least-squares fit of one family and dtype (``PARAM_BOUNDS``); padded families also fit
    ``pad_rows``, decode attention ``parallel_half_units`` and, by trying both, ``split_kv``.

    GEMM then fits its ``EXTRA`` terms (the single-row GEMV path and the harness cache cliff) with
    the base parameters held. In two stages because the base fit has flat directions (a fixed
    cost in ``launch_s`` or in the ``*_half`` terms prices the tables alike): fitted jointly, even
    from the base optimum, a term that changes nothing on a GPU (the cliff where
    ``cache_speedup`` is 1) moved H200 fp8 from 10.6 us of ``launch_s`` to 0.1 us and four times
    the half terms, which prices the shapes the tables lack (MoE, serving) differently."""
    free = _free(op)
    base_free = free[free < N_BASE]
    extra_free = free[free >= N_BASE]
    best: tuple[float, np.ndarray, bool] | None = None

    def resid(x: np.ndarray, idx: np.ndarray, v0: np.ndarray) -> np.ndarray:
        v = v0.copy()
        v[idx] = np.exp(x)
        return np.log(costs.model_time(cnt, _as_model_array(v), bw, v[5])) - np.log(latency_s)

    for split in (False, True) if op in SPLIT_KV else (False,):
        v0 = np.zeros(N_PARAMS + 1)
        v0[-1] = float(split)
        for x0 in _starts(op):
            cost, x = _least_squares(functools.partial(resid, idx=base_free, v0=v0), x0, base_free)
            if best is None or cost < best[0]:
                v = v0.copy()
                v[base_free] = np.exp(x)
                best = (cost, v, split)
    assert best is not None
    if extra_free.size:
        v1 = best[1]
        stage: tuple[float, np.ndarray] | None = None
        for e0 in _extra_starts(v1[:N_PARAMS]):
            x0 = np.zeros(N_PARAMS)
            x0[N_BASE:] = e0
            cost, x = _least_squares(
                functools.partial(resid, idx=extra_free, v0=v1), x0, extra_free
            )
            if stage is None or cost < stage[0]:
                v = v1.copy()
                v[extra_free] = np.exp(x)
                stage = (cost, v)
        assert stage is not None
        best = (stage[0], _identified(stage[1], v1, cnt, bw), best[2])
    return _params_from(best[1][:N_PARAMS]).model_copy(update={"split_kv": best[2]})


EXTRA_TERMS: Final[tuple[tuple[int, ...], ...]] = (GEMV_TERM, CLIFF_TERM)
"""``PARAM_ORDER`` indices of each ``EXTRA`` term: the GEMV path, the cache cliff."""


def _identified(v: np.ndarray, base: np.ndarray, cnt: costs.Counts, bw: float) -> np.ndarray:
    """``v`` with each ``EXTRA`` term that prices no fitted row differently from the base fit
    reset to 0 (off): a GEMV path the tiled GEMM beats on every row, a cliff where nothing is
    cached (``cache_speedup`` 1). Its value is not identified by the tables, so none is shipped,
    and no shape outside them can take a path no measurement showed."""
    out = v.copy()
    timed = costs.model_time(cnt, _as_model_array(out), bw, out[5])
    for idx in EXTRA_TERMS:
        off = out.copy()
        off[list(idx)] = base[list(idx)]
        if np.allclose(costs.model_time(cnt, _as_model_array(off), bw, off[5]), timed, rtol=1e-9):
            out = off
    return out


def _fitted_to(table: KernelTable, rows: int, sources: tuple[str, ...] = ()) -> FittedTo:
    return FittedTo(
        files=(Path(p).name for p in table.source.split("+")),
        rows=rows,  # type: ignore[arg-type]
        sources=sources,
    )


def implausible_roofline_rows(table: KernelTable, spec: GpuSpec) -> np.ndarray:
    """Rows of a compute table measured faster than the spec DRAM bandwidth allows: the bytes that
    cannot sit in the last-level cache (``bytes - l2_cache_bytes``) read at 100% of
    ``hbm_bandwidth_bytes_per_s`` take longer than the measured latency. No model with efficiencies
    within 100% can price them; they are left out of the fit and reported apart. Rows are priced as
    measured (``harness.measured_cols``): the 17 A100 decode rows of 0.5-2.1 GB that read at up to
    3.3 TB/s against a 2.04 TB/s spec came from a harness whose kernel reads half the KV from DRAM
    (``kernels_db.harness``); with that, none is left out today."""
    if table.op not in ROOFLINE_FAMILIES:
        return np.zeros(len(table), dtype=bool)
    cnt = costs.counts(table.op, measured_cols(table, spec), spec)
    beyond_cache = np.maximum(np.asarray(cnt.nbytes) - (spec.l2_cache_bytes or 0.0), 0.0)
    floor = np.broadcast_to(beyond_cache / spec.hbm_bandwidth_bytes_per_s, (len(table),))
    return np.asarray(floor > table.latency_s)


def fit_roofline_family(
    table: KernelTable, spec: GpuSpec, sources: tuple[str, ...] = ()
) -> RooflineFamilyFit:
    """Fit one compute family, one parameter set per dtype key, on the rows that
    ``implausible_roofline_rows`` keeps."""
    op = table.op
    groups = np.broadcast_to(
        np.asarray(costs.param_labels(op, table.keys), dtype=object), (len(table),)
    )
    keep = ~implausible_roofline_rows(table, spec)
    bw = spec.hbm_bandwidth_bytes_per_s
    params: dict[str, RooflineParams] = {}
    pred = np.empty(len(table))
    for name in sorted(set(groups.tolist())):
        mask = groups == name
        sub = table.subset(mask & keep)
        cnt = costs.counts(op, measured_cols(sub, spec), spec)
        prm = fit_roofline_params(op, cnt, sub.latency_s, bw)
        params[str(name)] = prm
        pred[mask & keep] = costs.model_time(cnt, prm.as_array(), bw, prm.pad_rows)
    return RooflineFamilyFit(
        params=params,
        fitted_to=_fitted_to(table, int(keep.sum()), sources),
        fit_error=fit_error(pred[keep], table.latency_s[keep]),
    )


COMM_LATENCY_BOUNDS_S: Final[tuple[float, float]] = (1e-7, 1e-2)
"""Bounds of every fitted collective latency (alpha): 0.1 us (a kernel launch on a fabric can not
start faster) to 10 ms (a multi-node ring over the slowest PCIe fabric is far below)."""
MIN_BUS_EFFICIENCY: Final[float] = 0.01
"""Lower bound of a fitted bus bandwidth as a share of the scale-up link's spec bandwidth (1%). The
upper bound is the link itself (100%), times 2(n-1)/n for all-reduce: NVLink SHARP (NVLS) reduces in
the switch, so each byte crosses a link once and the ring-equivalent bus bandwidth (nccl-tests
busbw, ring factor 2(n-1)/n) can exceed the link by that factor (H100/H200 8-GPU all-reduce:
1.02x)."""
COMM_BOUNDS: Final[dict[str, tuple[float, float, str]]] = {
    "comm.latency_s": (*COMM_LATENCY_BOUNDS_S, "s; every line of every collective"),
    "comm.bus_bandwidth_bytes_per_s": (
        MIN_BUS_EFFICIENCY,
        1.0,
        "share of the scale-up link's spec bandwidth (x 2(n-1)/n for all-reduce: NVLS)",
    ),
}
UNBOUNDED_LINK_BYTES_PER_S: Final[float] = 1e14
"""Bus-bandwidth ceiling when no link bandwidth is known (100 TB/s, above any fabric)."""
SMALL_LINE_MIN_GAIN: Final[float] = 0.05
"""A further latency-optimised line is kept only if it lowers the fit's loss by this share (5%) and
is the fastest at one measured size at least; else fewer lines (fewer constants)."""
LINE_START_SCALES: Final[tuple[float, ...]] = (0.25, 0.5, 0.8)
"""Start points of a new line, scaling the latency and bus bandwidth of the lowest-latency line so
far (the new line is tried below it: a protocol with less latency and less bandwidth)."""


def _bus_bounds(
    collective: str, n_gpus: int, link_bytes_per_s: float | None
) -> tuple[float, float]:
    """(lowest, highest) plausible bus bandwidth of one collective (``MIN_BUS_EFFICIENCY``)."""
    if not link_bytes_per_s:
        return 1e6, UNBOUNDED_LINK_BYTES_PER_S
    gain = 2.0 * (n_gpus - 1) / n_gpus if collective in cm.ALL_REDUCE_LIKE else 1.0
    return MIN_BUS_EFFICIENCY * link_bytes_per_s, max(gain, 1.0) * link_bytes_per_s


def _comm_fit(
    nbytes: np.ndarray,
    factor: np.ndarray,
    latency_s: np.ndarray,
    bw_bounds: tuple[float, float],
    starts: list[np.ndarray],
) -> tuple[np.ndarray, float]:
    """Best (log parameters (latency, bus bandwidth) per line, cost) from ``starts``."""
    k = starts[0].size // 2
    lo = np.log([COMM_LATENCY_BOUNDS_S[0], bw_bounds[0]] * k)
    hi = np.log([COMM_LATENCY_BOUNDS_S[1], bw_bounds[1]] * k)

    def resid(x: np.ndarray) -> np.ndarray:
        v = np.exp(x).reshape(k, 2)
        t = cm.alpha_beta(nbytes, factor, v[0, 0], v[0, 1], [tuple(r) for r in v[1:]])
        return np.asarray(np.log(t) - np.log(latency_s))

    best = None
    for x0 in starts:
        res = least_squares(
            resid,
            np.clip(x0, lo + 1e-9, hi - 1e-9),
            bounds=(lo, hi),
            loss="soft_l1",
            f_scale=ROBUST_SCALE,
        )
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    return best.x, float(best.cost)


def _winning_lines(v: np.ndarray, wire: np.ndarray) -> np.ndarray:
    """Lines (rows of ``v``: latency, bandwidth) that are the fastest at some measured size, the
    bandwidth-optimised one (highest bandwidth) first, then by falling bandwidth."""
    t = v[:, 0][:, None] + wire[None, :] / v[:, 1][:, None]
    keep = np.unique(np.argmin(t, axis=0))
    kept = v[keep]
    return np.asarray(kept[np.argsort(-kept[:, 1])])


def fit_comm_params(
    nbytes: np.ndarray,
    factor: np.ndarray,
    latency_s: np.ndarray,
    bw_bounds: tuple[float, float] = (1e6, UNBOUNDED_LINK_BYTES_PER_S),
) -> CommParams:
    """Alpha-beta fit of one collective at one GPU count: the bandwidth-optimised line, then up to
    ``MAX_SMALL_LINES`` latency-optimised lines, each kept when it lowers the loss by
    ``SMALL_LINE_MIN_GAIN`` (the time is the fastest line). Latencies within
    ``COMM_LATENCY_BOUNDS_S``, bus bandwidths within ``bw_bounds`` (``_bus_bounds``)."""
    wire = nbytes * factor
    lat0, bw_max = max(float(latency_s.min()), 2e-7), float(np.max(wire / latency_s))
    x, cost = _comm_fit(nbytes, factor, latency_s, bw_bounds, [np.log([lat0 * 0.8, bw_max])])
    for _ in range(MAX_SMALL_LINES):
        low = x.reshape(-1, 2)[int(np.argmin(x[0::2]))]
        starts = [
            np.concatenate([x, low + np.log([a, b])])
            for a in LINE_START_SCALES
            for b in LINE_START_SCALES
        ]
        x_new, cost_new = _comm_fit(nbytes, factor, latency_s, bw_bounds, starts)
        if cost_new > (1.0 - SMALL_LINE_MIN_GAIN) * cost:
            break
        x, cost = x_new, cost_new
    v = _winning_lines(np.exp(x).reshape(-1, 2), wire)
    return CommParams(
        latency_s=_sig(v[0, 0]),
        bus_bandwidth_bytes_per_s=_sig(v[0, 1]),
        small_lines=tuple(
            CommLine(latency_s=_sig(a), bus_bandwidth_bytes_per_s=_sig(b)) for a, b in v[:0:-1]
        ),
    )


def _sig(x: float) -> float:
    """``x`` at 4 significant figures (as written to the fitted files)."""
    return float(f"{float(x):.4g}")


def plausible_bus_bandwidth(
    nbytes: np.ndarray, factor: np.ndarray, latency_s: np.ndarray, link_bytes_per_s: float | None
) -> bool:
    """Whether the largest message of one (collective, GPU count) reaches ``MIN_BUS_FRACTION`` of
    the link's bandwidth (always true without a link bandwidth)."""
    if not link_bytes_per_s or not nbytes.size:
        return True
    i = int(np.argmax(nbytes))
    return bool(nbytes[i] * factor[i] / latency_s[i] >= MIN_BUS_FRACTION * link_bytes_per_s)


def _comm_groups(table: KernelTable) -> Iterator[tuple[str, int, np.ndarray]]:
    """(collective, GPU count, row mask) of every multi-GPU group of a comm table."""
    coll, n = table.keys["collective"], table.keys["n_gpus"]
    for c in sorted(set(coll.tolist())):
        for g in sorted(set(n[coll == c].tolist())):
            mask = (coll == c) & (n == g) & (g > 1)
            if mask.any():
                yield str(c), int(g), mask


def implausible_comm_rows(table: KernelTable, link_bytes_per_s: float | None) -> np.ndarray:
    """Rows of a comm table in a (collective, GPU count) group that ``plausible_bus_bandwidth``
    rejects."""
    out = np.zeros(len(table), dtype=bool)
    nbytes = table.keys["bytes"].astype(float)
    for c, g, mask in _comm_groups(table):
        if not plausible_bus_bandwidth(
            nbytes[mask],
            cm.algo_factor(c, np.full(mask.sum(), g)),
            table.latency_s[mask],
            link_bytes_per_s,
        ):
            out |= mask
    return out


def fit_comm(
    table: KernelTable, sources: tuple[str, ...] = (), link_bytes_per_s: float | None = None
) -> CommFamilyFit:
    """Fit alpha and bus bandwidth per collective and GPU count (rows on the scale-up link); groups
    whose bus bandwidth is implausibly low for a link of ``link_bytes_per_s`` are left out."""
    nbytes_all = table.keys["bytes"].astype(float)
    params: dict[str, dict[int, CommParams]] = {}
    pred = np.full(len(table), np.nan)
    fitted = np.zeros(len(table), dtype=bool)
    implausible = implausible_comm_rows(table, link_bytes_per_s)
    for c, g, group in _comm_groups(table):
        mask = group & ~implausible
        if not mask.any():
            continue
        factor = cm.algo_factor(c, np.full(mask.sum(), g))
        nbytes = nbytes_all[mask]
        bounds = _bus_bounds(c, g, link_bytes_per_s)
        prm = fit_comm_params(nbytes, factor, table.latency_s[mask], bounds)
        params.setdefault(c, {})[g] = prm
        pred[mask] = cm.params_time(nbytes, factor, prm)
        fitted |= mask
    ok = np.isfinite(pred)
    return CommFamilyFit(
        params=params,
        fitted_to=_fitted_to(table, int(fitted.sum()), sources),
        fit_error=fit_error(pred[ok], table.latency_s[ok]),
    )


def spec_used(spec: GpuSpec) -> dict[str, float]:
    """The spec numbers the efficiencies are relative to (recorded with the fit)."""
    out = {f"peak_flops_per_s.{d}": float(v) for d, v in sorted(spec.peak_flops_per_s.items())}
    out["hbm_bandwidth_bytes_per_s"] = spec.hbm_bandwidth_bytes_per_s
    if spec.l2_cache_bytes:
        out["l2_cache_bytes"] = spec.l2_cache_bytes
    return out


def fit_gpu(
    tables: dict[str, KernelTable],
    spec: GpuSpec,
    command: str,
    sources: dict[str, tuple[str, ...]] | None = None,
    notes: str = "",
) -> FittedGpu:
    """Fit every family present in ``tables``."""
    sources = sources or {}
    families = {
        op: fit_roofline_family(t, spec, sources.get(op, ()))
        for op, t in sorted(tables.items())
        if op in ROOFLINE_FAMILIES and len(t)
    }
    comm = (
        fit_comm(tables["comm"], sources.get("comm", ()), spec.scale_up.bandwidth_bytes_per_s)
        if "comm" in tables
        else None
    )
    return FittedGpu(
        gpu=spec.key,
        date=dt.date.today().isoformat(),
        command=command,
        spec_used=spec_used(spec),
        families=families,
        comm=comm,
        param_bounds={**PARAM_BOUNDS, **COMM_BOUNDS},
        notes=notes,
    )
