"""Accuracy of the kernel database against measured tables, per op family and GPU.

Two methods: ``loo_interpolation`` (drop each measured point, interpolate it from the others of its
partition; only points inside the remaining grid count) and ``fitted`` (the fitted roofline model
alone, fitted to the same folder, so in-sample). Errors are absolute percentage errors. Comm rows
the
fit leaves out for an implausibly low bus bandwidth, and compute rows measured faster than the spec
DRAM bandwidth allows (``fit.implausible_roofline_rows``), are reported as
``fitted_implausible_data``;
custom all-reduce rows are priced as the engine's all-reduce, the faster of it and NCCL.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

from hardware.spec import GpuSpec
from kernels_db.comm import CUSTOM_ALL_REDUCE
from kernels_db.fit import ape_pct, fit_gpu, implausible_comm_rows, implausible_roofline_rows
from kernels_db.fitted import FittedGpu
from kernels_db.harness import measured_cols
from kernels_db.interp import loo_log_ratio
from kernels_db.lookup import KernelDB, _comm_model
from kernels_db.tables import KernelTable

GroupRow: TypeAlias = dict[str, str | int | float | None]
"""One (op, gpu, method) group: n and median / p90 APE (%; None when n is 0)."""


def model_seconds(db: KernelDB, table: KernelTable) -> np.ndarray:
    """Model-only prediction of every row of ``table``."""
    n = len(table)
    if table.op == "comm":
        out = _comm_model(db, table.keys, n)
        custom = np.asarray(table.keys["collective"]).astype(str) == CUSTOM_ALL_REDUCE
        if (
            custom.any()
        ):  # the engine's all-reduce: the faster of its custom kernel and NCCL (comm.py)
            nccl = {
                **table.keys,
                "collective": np.where(custom, "all_reduce", table.keys["collective"]),
            }
            out = np.where(custom, np.minimum(out, _comm_model(db, nccl, n)), out)
        return out
    # priced as measured: harness columns (``kernels_db.harness``) where a harness read less
    return np.broadcast_to(db.model(table.op, measured_cols(table, db.spec))[0], (n,)).astype(float)


def loo_predictions(table: KernelTable, base: np.ndarray) -> np.ndarray:
    """Leave-one-out interpolated latency of each row (NaN where the row is outside the others'
    grid)."""
    ratio = np.log(table.latency_s) - np.log(base)
    return np.asarray(base * np.exp(loo_log_ratio(table.op, table.keys, ratio)))


def _groups(table: KernelTable) -> dict[str, np.ndarray]:
    """Rows per reported group: the op family, or one group per collective for comm."""
    if table.op != "comm":
        return {table.op: np.ones(len(table), dtype=bool)}
    return {
        f"comm_{c}": table.keys["collective"] == c
        for c in sorted(set(table.keys["collective"].tolist()))
    }


def _summary(op: str, gpu: str, method: str, pred: np.ndarray, meas: np.ndarray) -> GroupRow:
    ok = np.isfinite(pred)
    e = ape_pct(pred[ok], meas[ok])
    med = round(float(np.median(e)), 2) if e.size else None
    p90 = round(float(np.percentile(e, 90)), 2) if e.size else None
    return {
        "op": op,
        "gpu": gpu,
        "method": method,
        "n": int(e.size),
        "median_ape_pct": med,
        "p90_ape_pct": p90,
    }


def evaluate_gpu(
    spec: GpuSpec, tables: dict[str, KernelTable], fit: FittedGpu | None = None
) -> list[GroupRow]:
    """Groups (op, gpu, method, n, median/p90 APE) for one GPU's tables."""
    fit = fit or fit_gpu(tables, spec, command="validate (in-sample fit)")
    db = KernelDB(spec, {}, fit)
    rows: list[GroupRow] = []
    for _, table in sorted(tables.items()):
        base = model_seconds(db, table)
        loo = loo_predictions(table, base)
        # comm groups the fit leaves out as implausible (fit.MIN_BUS_FRACTION) are reported apart
        bad = (
            implausible_comm_rows(table, spec.scale_up.bandwidth_bytes_per_s)
            if table.op == "comm"
            else implausible_roofline_rows(table, spec)
        )
        for name, mask in _groups(table).items():
            rows.append(
                _summary(name, spec.key, "loo_interpolation", loo[mask], table.latency_s[mask])
            )
            rows.append(
                _summary(name, spec.key, "fitted", base[mask & ~bad], table.latency_s[mask & ~bad])
            )
            if (mask & bad).any():
                rows.append(
                    _summary(
                        name,
                        spec.key,
                        "fitted_implausible_data",
                        base[mask & bad],
                        table.latency_s[mask & bad],
                    )
                )
    return rows
