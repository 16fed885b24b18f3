"""Fit named efficiency parameters per op family to measured tables (scipy least squares on
log-latency, so every row weighs by its relative error). Reproducible: deterministic start points.
"""

from __future__ import annotations

import datetime as dt
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

ROOFLINE_FAMILIES: Final[tuple[str, ...]] = ("gemm", "attention_prefill", "attention_decode", "mla_prefill",
                                             "mla_decode", "moe", "memcpy")
# log-space bounds: launch_s, compute_eff, compute_half_flops, memory_eff, memory_half_bytes, pad_rows
LOWER: Final[np.ndarray] = np.log([1e-7, 0.02, 1.0, 0.02, 1.0, 0.01])
UPPER: Final[np.ndarray] = np.log([2e-4, 1.0, 1e13, 1.2, 1e10, 1e5])
PADDED: Final[frozenset[str]] = frozenset({"gemm", "attention_prefill", "attention_decode"})
PAD_STARTS: Final[tuple[float, ...]] = (1.0, 64.0, 4096.0)  # several starts: the max() has kinks
ROBUST_SCALE: Final[float] = 0.1  # soft-L1 loss: residuals past ~10% count linearly (outliers)


def ape_pct(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Absolute percentage error of each prediction."""
    return np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0) * 100.0


def fit_error(predicted: np.ndarray, measured: np.ndarray) -> FitError:
    """Median and p90 APE."""
    e = ape_pct(predicted, measured)
    if e.size == 0:
        return FitError(n=0, median_ape_pct=0.0, p90_ape_pct=0.0)
    return FitError(n=int(e.size), median_ape_pct=round(float(np.median(e)), 2),
                    p90_ape_pct=round(float(np.percentile(e, 90)), 2))


def _params_from(x: np.ndarray, gemm: bool) -> RooflineParams:
    v = np.exp(x)
    return RooflineParams(launch_s=float(f"{v[0]:.4g}"), compute_eff=float(f"{v[1]:.4g}"),
                          compute_half_flops=float(f"{v[2]:.4g}"), memory_eff=float(f"{v[3]:.4g}"),
                          memory_half_bytes=float(f"{v[4]:.4g}"), pad_rows=float(f"{v[5]:.4g}") if gemm else 0.0)


def _start(op: str) -> np.ndarray:
    d = DEFAULT_PARAMS[op]
    x = np.log([d.launch_s, d.compute_eff, max(d.compute_half_flops, 1.0), d.memory_eff,
                max(d.memory_half_bytes, 1.0), max(d.pad_rows, 1.0)])
    return np.clip(x, LOWER + 1e-9, UPPER - 1e-9)


def fit_roofline_params(op: str, cnt: costs.Counts, latency_s: np.ndarray, bw: float) -> RooflineParams:
    """Least-squares fit of one family and dtype; GEMM also fits ``pad_rows``."""
    gemm = op in PADDED
    n_par = 6 if gemm else 5

    def resid(x: np.ndarray) -> np.ndarray:
        p = np.exp(x[:5])
        pad = np.exp(x[5]) if gemm else 0.0
        return np.log(costs.model_time(cnt, p, bw, pad)) - np.log(latency_s)

    best = None
    for pad0 in PAD_STARTS if gemm else (1.0,):
        x0 = _start(op)
        x0[5] = np.log(pad0)
        res = least_squares(resid, x0[:n_par], bounds=(LOWER[:n_par], UPPER[:n_par]),
                            loss="soft_l1", f_scale=ROBUST_SCALE)
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    res = best
    x = np.append(res.x, 0.0) if not gemm else res.x
    return _params_from(x, gemm)


def _fitted_to(table: KernelTable, rows: int, sources: tuple[str, ...] = ()) -> FittedTo:
    return FittedTo(files=(Path(p).name for p in table.source.split("+")), rows=rows,  # type: ignore[arg-type]
                    sources=sources)


def fit_roofline_family(table: KernelTable, spec: GpuSpec, sources: tuple[str, ...] = ()) -> RooflineFamilyFit:
    """Fit one compute family, one parameter set per dtype key."""
    op = table.op
    key = costs.PARAM_KEY[op]
    groups = table.keys[key] if key else np.full(len(table), costs.MEMCPY_KEY, dtype=object)
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
    return RooflineFamilyFit(params=params, fitted_to=_fitted_to(table, len(table), sources),
                             fit_error=fit_error(pred, table.latency_s))


def fit_comm_params(nbytes: np.ndarray, factor: np.ndarray, latency_s: np.ndarray) -> CommParams:
    """Alpha-beta fit of one collective at one GPU count."""
    x0 = np.log([max(latency_s.min() * 0.8, 1e-7), max(float(np.max(nbytes * factor / latency_s)), 1e6)])

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(cm.alpha_beta(nbytes, factor, np.exp(x[0]), np.exp(x[1]))) - np.log(latency_s)

    res = least_squares(resid, x0, loss="soft_l1", f_scale=ROBUST_SCALE)
    lat, bw = np.exp(res.x)
    return CommParams(latency_s=float(f"{lat:.4g}"), bus_bandwidth_bytes_per_s=float(f"{bw:.4g}"))


def fit_comm(table: KernelTable, sources: tuple[str, ...] = ()) -> CommFamilyFit:
    """Fit alpha and bus bandwidth per collective and GPU count (rows on the scale-up link)."""
    coll, n = table.keys["collective"], table.keys["n_gpus"]
    params: dict[str, dict[int, CommParams]] = {}
    pred = np.full(len(table), np.nan)
    for c in sorted(set(coll.tolist())):
        for g in sorted(set(n[coll == c].tolist())):
            mask = (coll == c) & (n == g) & (g > 1)
            if not mask.any():
                continue
            factor = cm.algo_factor(str(c), np.full(mask.sum(), g))
            nbytes = table.keys["bytes"][mask].astype(float)
            prm = fit_comm_params(nbytes, factor, table.latency_s[mask])
            params.setdefault(str(c), {})[int(g)] = prm
            pred[mask] = cm.alpha_beta(nbytes, factor, prm.latency_s, prm.bus_bandwidth_bytes_per_s)
    ok = np.isfinite(pred)
    return CommFamilyFit(params=params, fitted_to=_fitted_to(table, int(ok.sum()), sources),
                         fit_error=fit_error(pred[ok], table.latency_s[ok]))


def spec_used(spec: GpuSpec) -> dict[str, float]:
    """The spec numbers the efficiencies are relative to (recorded with the fit)."""
    out = {f"peak_flops_per_s.{d}": float(v) for d, v in sorted(spec.peak_flops_per_s.items())}
    out["hbm_bandwidth_bytes_per_s"] = spec.hbm_bandwidth_bytes_per_s
    return out


def fit_gpu(tables: dict[str, KernelTable], spec: GpuSpec, command: str,
            sources: dict[str, tuple[str, ...]] | None = None, notes: str = "") -> FittedGpu:
    """Fit every family present in ``tables``."""
    sources = sources or {}
    families = {op: fit_roofline_family(t, spec, sources.get(op, ()))
                for op, t in sorted(tables.items()) if op in ROOFLINE_FAMILIES and len(t)}
    comm = fit_comm(tables["comm"], sources.get("comm", ())) if "comm" in tables else None
    return FittedGpu(gpu=spec.key, date=dt.date.today().isoformat(), command=command,
                     spec_used=spec_used(spec), families=families, comm=comm, notes=notes)
