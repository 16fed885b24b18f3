"""Fit named efficiency parameters per op family to measured tables (scipy least squares on
log-latency, so every row weighs by its relative error). Reproducible: deterministic start points.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import numpy as np
from scipy.optimize import least_squares

from hardware.spec import GpuSpec
from kernels_db import comm as cm
from kernels_db import costs
from kernels_db.fitted import (
    DEFAULT_PARAMS,
    CommFamilyFit,
    CommParams,
    FitError,
    FittedGpu,
    FittedTo,
    RooflineFamilyFit,
    RooflineParams,
)
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
# log-space bounds: launch_s, compute_eff, compute_half_flops, memory_eff, memory_half_bytes,
# pad_rows, parallel_half_units, cache_speedup (up to 10x: L2 vs DRAM bandwidth, e.g. ~5.5 vs
# 0.86 TB/s on L40S)
LOWER: Final[np.ndarray] = np.log([1e-7, 1e-3, 1.0, 0.02, 1.0, 0.01, 1e-3, 1.0])
UPPER: Final[np.ndarray] = np.log([2e-4, 1.0, 1e13, 1.2, 1e10, 1e5, 1e4, 10.0])
PADDED: Final[frozenset[str]] = frozenset({"gemm", "attention_prefill", "attention_decode"})
OCCUPANCY: Final[frozenset[str]] = frozenset({"attention_decode"})
CACHED: Final[frozenset[str]] = frozenset(
    {"gemm", "attention_decode"}
)  # read a re-usable working set
PAD_STARTS: Final[tuple[float, ...]] = (1.0, 64.0, 4096.0)  # several starts: the max() has kinks
UNIT_STARTS: Final[tuple[float, ...]] = (0.1, 4.0)
CACHE_START: Final[float] = 2.0
ROBUST_SCALE: Final[float] = 0.1  # soft-L1 loss: residuals past ~10% count linearly (outliers)
N_PARAMS: Final[int] = 8
CUSTOM_ALL_REDUCE_MAX_BYTES: Final[float] = float(1 << 20)
"""Largest message the custom (one-/two-shot) all-reduce is fitted on. Engines run their own kernel
only for small messages and hand larger ones to NCCL (TensorRT-LLM ``AllReduceStrategy.AUTO``; vLLM
``custom_all_reduce`` below a few MB depending on TP): aiconfigurator's custom_allreduce_perf rows
match nccl_perf within a few percent from ~4 MB up (H100 TP8 16 MB: 122 vs 121 us), so one
alpha-beta line through all sizes averages two algorithms and comes out 2-3x too cheap at 0.25-4 MB
(H100 TP8 1 MB: 9.8 us priced, 26 us measured). The planner prices an all-reduce as the faster of
the two fits, so above this size NCCL takes over continuously."""
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
    return np.array(idx + ([7] if op in CACHED else []))


def _params_from(v: np.ndarray) -> RooflineParams:
    r = [float(f"{x:.4g}") for x in v]
    return RooflineParams(
        launch_s=r[0],
        compute_eff=r[1],
        compute_half_flops=r[2],
        memory_eff=r[3],
        memory_half_bytes=r[4],
        pad_rows=r[5],
        parallel_half_units=r[6],
        cache_speedup=max(r[7], 1.0),
    )


def _starts(op: str) -> list[np.ndarray]:
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
            CACHE_START,
        ]
    )
    out = []
    for pad0 in PAD_STARTS if op in PADDED else (1.0,):
        for units0 in UNIT_STARTS if op in OCCUPANCY else (1.0,):
            x = base.copy()
            x[5], x[6] = np.log(pad0), np.log(units0)
            out.append(np.clip(x, LOWER + 1e-9, UPPER - 1e-9))
    return out


def fit_roofline_params(
    op: str, cnt: costs.Counts, latency_s: np.ndarray, bw: float
) -> RooflineParams:
    """Least-squares fit of one family and dtype; padded families also fit ``pad_rows``, decode
    attention ``parallel_half_units``."""
    free = _free(op)

    def full(x: np.ndarray) -> np.ndarray:
        v = np.zeros(N_PARAMS)
        v[free] = np.exp(x)
        return v

    def resid(x: np.ndarray) -> np.ndarray:
        v = full(x)
        return np.log(costs.model_time(cnt, np.append(v[:5], v[6:]), bw, v[5])) - np.log(latency_s)

    best = None
    for x0 in _starts(op):
        res = least_squares(
            resid, x0[free], bounds=(LOWER[free], UPPER[free]), loss="soft_l1", f_scale=ROBUST_SCALE
        )
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    return _params_from(full(best.x))


def _fitted_to(table: KernelTable, rows: int, sources: tuple[str, ...] = ()) -> FittedTo:
    return FittedTo(
        files=(Path(p).name for p in table.source.split("+")),
        rows=rows,  # type: ignore[arg-type]
        sources=sources,
    )


def fit_roofline_family(
    table: KernelTable, spec: GpuSpec, sources: tuple[str, ...] = ()
) -> RooflineFamilyFit:
    """Fit one compute family, one parameter set per dtype key."""
    op = table.op
    groups = np.broadcast_to(
        np.asarray(costs.param_labels(op, table.keys), dtype=object), (len(table),)
    )
    bw = spec.hbm_bandwidth_bytes_per_s
    params: dict[str, RooflineParams] = {}
    pred = np.empty(len(table))
    for name in sorted(set(groups.tolist())):
        mask = groups == name
        sub = table.subset(mask)
        cnt = costs.counts(op, sub.keys, spec)
        prm = fit_roofline_params(op, cnt, sub.latency_s, bw)
        params[str(name)] = prm
        pred[mask] = costs.model_time(cnt, prm.as_array(), bw, prm.pad_rows)
    return RooflineFamilyFit(
        params=params,
        fitted_to=_fitted_to(table, len(table), sources),
        fit_error=fit_error(pred, table.latency_s),
    )


def fit_comm_params(nbytes: np.ndarray, factor: np.ndarray, latency_s: np.ndarray) -> CommParams:
    """Alpha-beta fit of one collective at one GPU count."""
    x0 = np.log(
        [max(latency_s.min() * 0.8, 1e-7), max(float(np.max(nbytes * factor / latency_s)), 1e6)]
    )

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(cm.alpha_beta(nbytes, factor, np.exp(x[0]), np.exp(x[1]))) - np.log(latency_s)

    res = least_squares(resid, x0, loss="soft_l1", f_scale=ROBUST_SCALE)
    lat, bw = np.exp(res.x)
    return CommParams(latency_s=float(f"{lat:.4g}"), bus_bandwidth_bytes_per_s=float(f"{bw:.4g}"))


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
        if c == cm.CUSTOM_ALL_REDUCE:
            mask &= nbytes_all <= CUSTOM_ALL_REDUCE_MAX_BYTES
        if not mask.any():
            continue
        factor = cm.algo_factor(c, np.full(mask.sum(), g))
        nbytes = nbytes_all[mask]
        prm = fit_comm_params(nbytes, factor, table.latency_s[mask])
        params.setdefault(c, {})[g] = prm
        pred[mask] = cm.alpha_beta(nbytes, factor, prm.latency_s, prm.bus_bandwidth_bytes_per_s)
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
        notes=notes,
    )
